"""The start form's provider field: a model target speaking OpenAI's protocol (the default, no
``provider`` in the snapshot), Anthropic's (its optional version) or Azure's (deployment and API
version), each provider's own fields kept only for it, and its errors shown on the field."""

from __future__ import annotations

import pytest
from django.urls import reverse

from evals.models import Run
from tests.evals.test_targets_anthropic_paths import _suite
from tests.evals.test_views_runs import start_form

pytestmark = pytest.mark.django_db

MODEL = {
    "target_kind": "openai",
    "base_url": "http://127.0.0.1:9/v1",
    "model": "m",
    "prompt_template": "$input",
    "trials_per_case": "1",
}


@pytest.fixture
def post(client, carol, monkeypatch):
    monkeypatch.setattr("evals.runner.start.transaction.on_commit", lambda fn, **kw: None)
    client.force_login(carol)
    suite = _suite()

    def send(name: str, **fields):
        data = start_form(suite, name=name, **MODEL, **fields)
        return client.post(reverse("evals:run-new"), data)

    return send


def test_the_page_offers_the_three_providers_and_their_fields(client, carol):
    client.force_login(carol)
    page = client.get(reverse("evals:run-new")).content.decode()
    for value in ("openai", "anthropic", "azure"):
        assert f'<option value="{value}"' in page
    for name in ("anthropic_version", "deployment", "api_version"):
        assert f'name="{name}"' in page
    assert 'data-provider="azure"' in page and 'data-provider="anthropic"' in page


def test_each_provider_starts_its_target_with_only_its_own_fields(post):
    post("openai", provider="openai", deployment="ignored", anthropic_version="x")
    post(
        "anthropic",
        provider="anthropic",
        anthropic_version="2023-06-01",
        deployment="ignored",
        settings_json='{"max_tokens": 64}',
    )
    post("anthropic-default", provider="anthropic", settings_json='{"max_tokens": 64}')
    post(
        "azure",
        provider="azure",
        deployment=" gpt-4o-mini ",
        api_version="2024-10-21",
        anthropic_version="ignored",
        api_key_env="",
    )
    targets = {run.name: run.target for run in Run.objects.all()}
    base = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    assert targets["openai"] == {**base, "prompt_template": "$input", "settings": {}}
    assert targets["anthropic"] == {
        "kind": "openai",
        "provider": "anthropic",
        "anthropic_version": "2023-06-01",
        **base,
        "prompt_template": "$input",
        "settings": {"max_tokens": 64},
    }
    assert "anthropic_version" not in targets["anthropic-default"]
    assert targets["azure"] == {
        "kind": "openai",
        "provider": "azure",
        "deployment": "gpt-4o-mini",
        "api_version": "2024-10-21",
        **base,
        "prompt_template": "$input",
        "settings": {},
    }


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"provider": "azure", "api_version": "2024-10-21"}, "deployment", "required with"),
        (
            {"provider": "azure", "deployment": "a/b", "api_version": "2024-10-21"},
            "deployment",
            "is not a deployment name",
        ),
        (
            {"provider": "azure", "deployment": "d", "api_version": "latest"},
            "api_version",
            "such as",
        ),
        ({"provider": "anthropic"}, "settings_json", "required by Anthropic"),
        (
            {
                "provider": "anthropic",
                "anthropic_version": "2023 06",
                "settings_json": '{"max_tokens": 9}',
            },
            "anthropic_version",
            "expected an API version",
        ),
        ({"provider": "bedrock"}, "provider", "Select a valid choice"),
    ],
)
def test_a_providers_error_is_shown_on_its_field_and_nothing_starts(post, fields, field, says):
    answer = post("bad", **fields)
    assert answer.status_code == 200
    errors = answer.context["form"].errors
    assert list(errors) == [field], errors
    assert says in errors[field][0]
    assert not Run.objects.exists()
