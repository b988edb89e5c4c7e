"""Starting an experiment from a page (evals.views.experiments.experiment_new): prefilled from
a run, each variant's error on its own row's field, key-looking values never shown back,
engineers and leads only."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from evals.models import Case, Experiment, Run, Suite

pytestmark = pytest.mark.django_db

URL = reverse("evals:experiment-new")
GRADERS = [{"key": "exact", "kind": "exact"}]
MODEL_TARGET = {
    "kind": "openai",
    "base_url": "http://127.0.0.1:9/v1",
    "model": "gpt-4o-mini",
    "api_key_env": None,
    "prompt_template": "Answer: $input",
    "system_prompt": "Be brief.",
    "settings": {"temperature": 0.2},
}


@pytest.fixture
def suite(db) -> Suite:
    suite = Suite.objects.create(name="support")
    Case.objects.bulk_create(
        Case(suite=suite, key=f"k{i}", input=f"q{i}", expected=f"a{i}", content_hash=f"{i:064d}")
        for i in range(3)
    )
    return suite


@pytest.fixture
def source_run(suite) -> Run:
    return Run.objects.create(
        suite=suite,
        name="nightly",
        target_kind="openai",
        target=MODEL_TARGET,
        graders=GRADERS,
        trials_per_case=3,
        status=Run.Status.SUCCEEDED,
    )


def _post(base_target: dict, rows: list[dict], **shared) -> dict:
    data = {
        "suite": str(shared.pop("suite").uuid),
        "name": "prompts",
        "trials_per_case": "2",
        "graders": json.dumps(GRADERS),
        "base_target": json.dumps(base_target),
        "alpha": "0.05",
        "metric": "pass_rate",
        "k": "1",
        "seed": "",
        "variants-TOTAL_FORMS": str(len(rows)),
        "variants-INITIAL_FORMS": "0",
        "variants-MIN_NUM_FORMS": "2",
        "variants-MAX_NUM_FORMS": "20",
        **shared,
    }
    for i, row in enumerate(rows):
        for name, value in row.items():
            data[f"variants-{i}-{name}"] = value
    return data


def test_the_form_from_a_run_is_prefilled_with_its_suite_graders_trials_and_target(
    client, carol, source_run
):
    client.force_login(carol)
    response = client.get(URL + f"?like={source_run.uuid}")
    assert response.status_code == 200
    form, rows = response.context["form"], response.context["rows"]
    assert form.initial["suite"] == source_run.suite
    assert form.initial["trials_per_case"] == 3
    assert json.loads(form.initial["base_target"]) == MODEL_TARGET
    assert json.loads(form.initial["graders"]) == GRADERS
    first = rows.forms[0].initial
    assert first["prompt_template"] == "Answer: $input" and first["model"] == "gpt-4o-mini"
    assert json.loads(first["settings_json"]) == {"temperature": 0.2}
    assert len(rows.forms) == 2
    text = response.content.decode()
    assert 'id="variant-row-template"' in text and "variants-__prefix__-label" in text


def test_a_run_page_links_to_the_form_for_engineers(client, carol, bob, source_run):
    client.force_login(carol)
    assert 'id="run-experiment-new"' in client.get(source_run.get_absolute_url()).content.decode()
    client.force_login(bob)
    assert (
        'id="run-experiment-new"' not in client.get(source_run.get_absolute_url()).content.decode()
    )


def test_posting_starts_the_variants_each_the_base_with_its_own_fields(client, carol, suite):
    client.force_login(carol)
    base = {"kind": "simulated", "seed": 1, "default_pass_probability": 0.5}
    rows = [
        {"label": "base"},
        {"label": "strong", "other_json": '{"default_pass_probability": 0.9}'},
        {"label": "dropped", "DELETE": "on"},
        {"label": "weak", "other_json": '{"default_pass_probability": 0.1}'},
    ]
    response = client.post(URL, _post(base, rows, suite=suite, seed="9"))
    experiment = Experiment.objects.get(name="prompts")
    assert response.status_code == 302 and response["Location"] == experiment.get_absolute_url()
    variants = list(experiment.variants.select_related("run").order_by("position"))
    assert [v.label for v in variants] == ["base", "strong", "weak"]
    assert [v.run.target["default_pass_probability"] for v in variants] == [0.5, 0.9, 0.1]
    assert {v.run.trials_per_case for v in variants} == {2}
    assert experiment.seed == 9 and experiment.started_by == carol


def test_a_model_variants_fields_replace_the_bases(client, carol, suite):
    client.force_login(carol)
    rows = [
        {"label": "as is"},
        {
            "label": "chatty",
            "prompt_template": "Explain: $input",
            "system_prompt": "Be thorough.",
            "model": "gpt-4o",
            "settings_json": '{"temperature": 1.0}',
        },
    ]
    client.post(URL, _post(MODEL_TARGET, rows, suite=suite))
    chatty = Experiment.objects.get().variants.get(label="chatty").run.target
    assert chatty["prompt_template"] == "Explain: $input"
    assert chatty["system_prompt"] == "Be thorough." and chatty["model"] == "gpt-4o"
    assert chatty["settings"] == {"temperature": 1.0}
    assert chatty["base_url"] == MODEL_TARGET["base_url"]  # the rest from the base


def test_a_variants_error_is_shown_on_that_rows_field(client, carol, suite):
    client.force_login(carol)
    rows = [{"label": "ok"}, {"label": "broken", "prompt_template": "Answer {input}"}]
    response = client.post(URL, _post(MODEL_TARGET, rows, suite=suite))
    assert response.status_code == 200
    assert not Experiment.objects.exists() and not Run.objects.exists()
    forms = response.context["rows"].forms
    assert forms[1].errors.get("prompt_template")
    assert "prompt_template" in forms[1].errors["prompt_template"][0]
    assert not forms[0].errors


def test_a_duplicate_label_is_shown_on_the_second_rows_label(client, carol, suite):
    client.force_login(carol)
    rows = [{"label": "same"}, {"label": "Same"}]
    response = client.post(URL, _post(MODEL_TARGET, rows, suite=suite))
    forms = response.context["rows"].forms
    assert forms[1].errors.get("label") and not forms[0].errors


def test_a_taken_name_is_shown_on_the_name_field(client, carol, suite):
    client.force_login(carol)
    rows = [{"label": "a"}, {"label": "b"}]
    client.post(URL, _post(MODEL_TARGET, rows, suite=suite))
    response = client.post(URL, _post(MODEL_TARGET, rows, suite=suite))
    assert response.context["form"].errors.get("name")


def test_a_re_rendered_form_never_shows_a_key_looking_value(client, carol, suite):
    client.force_login(carol)
    key = "sk-proj-" + "A1b2C3d4" * 5
    base = {**MODEL_TARGET, "api_key_env": key}
    rows = [
        {"label": "a", "settings_json": json.dumps({"api_key": key})},
        {"label": "b", "other_json": json.dumps({"token": key})},
    ]
    response = client.post(URL, _post(base, rows, suite=suite))
    assert response.status_code == 200 and not Experiment.objects.exists()
    assert key not in response.content.decode()


def test_reviewers_and_outsiders_are_refused(client, bob, mallory, suite):
    rows = [{"label": "a"}, {"label": "b"}]
    for user in (bob, mallory):
        client.force_login(user)
        assert client.get(URL).status_code == 403
        assert client.post(URL, _post(MODEL_TARGET, rows, suite=suite)).status_code == 403
    assert not Experiment.objects.exists()


def test_the_suite_page_links_to_an_empty_form(client, alice, suite):
    client.force_login(alice)
    page = client.get(reverse("evals:suite-detail", kwargs={"suite_id": suite.uuid}))
    assert 'id="suite-experiment-new"' in page.content.decode()
    response = client.get(URL + f"?suite={suite.uuid}")
    assert response.status_code == 200 and response.context["form"].initial["suite"] == suite
    assert client.get(URL + "?suite=nope").status_code == 400
    assert client.get(URL).status_code == 200  # from the list: no suite chosen yet
    assert client.get(URL + "?like=nope").status_code == 400


def test_unstorable_text_in_a_row_is_refused_on_that_row(client, carol, suite):
    client.force_login(carol)
    rows = [{"label": "a"}, {"label": "b\x00c"}]
    response = client.post(URL, _post(MODEL_TARGET, rows, suite=suite))
    assert response.status_code == 200 and not Experiment.objects.exists()
    assert response.context["rows"].forms[1].errors.get("label")


def test_fewer_than_two_rows_kept_is_refused_above_the_rows(client, carol, suite):
    client.force_login(carol)
    rows = [{"label": "a"}, {"label": "b", "DELETE": "on"}]
    response = client.post(URL, _post(MODEL_TARGET, rows, suite=suite))
    assert response.status_code == 200 and not Experiment.objects.exists()
    assert response.context["rows"].non_form_errors()


def test_a_form_prefilled_from_a_run_never_shows_a_key_looking_value(client, carol, suite):
    key = "sk-proj-" + "Z9y8X7w6" * 5
    run = Run.objects.create(
        suite=suite,
        name="keyed",
        target_kind="openai",
        target={**MODEL_TARGET, "settings": {"user": key, "temperature": 0}},
        graders=[{"key": "exact", "kind": "exact"}],
        trials_per_case=2,
        status=Run.Status.SUCCEEDED,
    )
    client.force_login(carol)
    page = client.get(f"{URL}?like={run.uuid}").content.decode()
    assert key not in page
    assert "temperature" in page  # the rest of the settings is carried
