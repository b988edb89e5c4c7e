"""A model endpoint's ``base_url`` is stored with its run or judge version and shown to every
role: one holding a user, a password or a query (where keys travel) is refused on every path,
and the refusal never repeats it (``providers.endpoint.base_url_parse``)."""

from __future__ import annotations

import pytest

from core.errors import DomainError
from evals.models import Run, Suite
from evals.runner.targets.openai import OpenAIConfig
from judges.versions import judge_version_create
from tests.core.test_api_core import client_for

SECRET = "pwSECRET1"
BAD = [
    f"http://user:{SECRET}@127.0.0.1:8791/v1",
    f"http://{SECRET}@127.0.0.1:8791/v1",
    f"http://127.0.0.1:8791/v1?key={SECRET}",
    f"http://127.0.0.1:8791/v1#{SECRET}",
    f"https://api.example.com/v1/?api-key={SECRET}",
]


def _target(base_url: str) -> dict:
    return {
        "kind": "openai",
        "base_url": base_url,
        "model": "m",
        "prompt_template": "$input",
        "api_key_env": None,
    }


@pytest.mark.parametrize("base_url", BAD)
def test_a_target_with_a_secret_in_its_url_is_refused_without_repeating_it(base_url):
    with pytest.raises(DomainError) as refused:
        OpenAIConfig.parse(_target(base_url))
    assert refused.value.field == "target.base_url"
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize("base_url", BAD)
def test_a_judge_version_with_a_secret_in_its_url_is_refused(db, base_url):
    with pytest.raises(DomainError) as refused:
        judge_version_create(
            judge_name="j",
            kind="rubric",
            model="m",
            base_url=base_url,
            prompt_template="",
            params={"api_key_env": None},
            output_schema={},
        )
    assert refused.value.field.endswith("base_url")
    assert SECRET not in str(refused.value)


@pytest.mark.django_db
def test_the_api_refuses_it_with_a_400_naming_the_field_and_stores_nothing(carol):
    suite = Suite.objects.create(name="s")
    body = {
        "suite": str(suite.uuid),
        "name": "leak",
        "target": _target(BAD[0]),
        "graders": [{"key": "n", "kind": "regex", "config": {"pattern": "."}}],
        "trials_per_case": 1,
    }
    answer = client_for(carol).post("/api/runs/start", body, format="json")
    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == "target.base_url"
    assert SECRET not in answer.content.decode()
    assert not Run.objects.filter(name="leak").exists()


def test_a_plain_base_url_with_a_path_and_port_is_accepted():
    config = OpenAIConfig.parse(_target("http://127.0.0.1:8791/v1/"))
    assert config.base_url == "http://127.0.0.1:8791/v1"
