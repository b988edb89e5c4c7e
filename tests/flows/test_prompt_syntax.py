"""One prompt-template syntax, ``$name``, for targets and judges, on every surface that takes a
template (the run start form and API, the judge version form, ``apply_config``), and for
judge versions stored before it (migrated, or refused with an errored grade: never sent
with ``{input}`` in them)."""

from __future__ import annotations

import importlib
import json
from io import StringIO

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from apitokens.tokens import token_create
from core.errors import DomainError
from evals.models import Case, Grade, Run, Suite, TargetPreset, TrialPair
from evals.runner.start import run_start
from judges import client as judge_client
from judges import kinds
from judges.grading import judge_grade_trials, template_refusal
from judges.models import JudgeVersion, PairwiseVerdict, ProbeRun
from judges.models.versions import judge_version_hash
from judges.pairwise import pair_judge
from judges.probes import probe_run_start
from judges.prompts import prompt_render
from tests.fakellm import FakeLLM
from tests.judge_builders import make_trials, make_version, trust, verdict_json

pytestmark = pytest.mark.django_db

TARGET_PLACEHOLDERS = "$input, $expected, $key, $context, $tags, $attempt"
RUBRIC_PLACEHOLDERS = "$criteria, $input, $reference, $output, $examples"
BRACES = f"uses {{input}}; write $input (placeholders: {TARGET_PLACEHOLDERS})"
NO_CASE = (
    "uses no case placeholder, so every case would be sent the same prompt: use $input "
    "(case placeholders: $input, $expected, $context, $key)"
)
GRADERS = [{"key": "has-four", "kind": "contains", "config": {"value": "4"}}]


@pytest.fixture(autouse=True)
def no_waits(monkeypatch):
    async def fake_sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(judge_client, "default_sleep", fake_sleep)


@pytest.fixture
def suite() -> Suite:
    s = Suite.objects.create(name="s")
    Case.objects.create(suite=s, key="c1", input="What is 2+2?", expected="4")
    return s


def openai_target(template: str) -> dict:
    return {
        "kind": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "prompt_template": template,
    }


def legacy(version: JudgeVersion, template: str) -> JudgeVersion:
    """``version`` as a row stored before the ``$name`` syntax (written past the checks)."""
    JudgeVersion.objects.filter(pk=version.pk).update(prompt_template=template)
    version.refresh_from_db()
    return version


# -- targets: the run start form and API -------------------------------------------------------


def start_form(suite: Suite, template: str) -> dict:
    return {
        "suite": str(suite.uuid),
        "name": "r",
        "target_kind": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "prompt_template": template,
        "settings_json": "{}",
        "trials_per_case": "1",
        "graders": json.dumps(GRADERS),
    }


@pytest.mark.parametrize(
    ("template", "message"), [("Answer: {input}", BRACES), ("Answer the question.", NO_CASE)]
)
def test_the_start_form_shows_a_bad_template_on_its_field(client, carol, suite, template, message):
    client.force_login(carol)
    response = client.post(reverse("evals:run-new"), start_form(suite, template))
    assert response.status_code == 200
    assert response.context["form"].errors["prompt_template"] == [message]
    assert not Run.objects.exists()


def test_the_start_form_says_which_syntax_to_use(client, carol, suite):
    client.force_login(carol)
    help_text = client.get(reverse("evals:run-new")).context["form"]["prompt_template"].help_text
    assert help_text.startswith("Placeholders: $input (the case input), $expected")
    assert "{input}" not in help_text.replace("${input}", "")


def test_the_start_form_starts_a_run_with_a_dollar_template(client, carol, suite):
    client.force_login(carol)
    template = 'Reply {"answer": ...} to ${input}'
    response = client.post(reverse("evals:run-new"), start_form(suite, template))
    assert response.status_code == 302
    assert Run.objects.get().target["prompt_template"] == template


def api_client(user) -> APIClient:
    client = APIClient()
    _, token = token_create(user=user, name="ci")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.mark.parametrize(
    ("template", "message"), [("Answer: {input}", BRACES), ("Answer the question.", NO_CASE)]
)
def test_the_api_refuses_a_bad_target_template_naming_the_field(carol, suite, template, message):
    body = {
        "suite": str(suite.uuid),
        "name": "r",
        "target": openai_target(template),
        "graders": GRADERS,
        "trials_per_case": 1,
    }
    response = api_client(carol).post("/api/runs/start", body, format="json")
    assert response.status_code == 400
    assert response.json()["detail"] == f"target.prompt_template: {message}"
    assert response.json()["field"] == "target.prompt_template"
    assert not Run.objects.exists()


# -- judges: the version form and apply_config -------------------------------------------------


def judge_form(template: str) -> dict:
    return {
        "name": "helpful",
        "kind": "rubric",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "judge-model",
        "prompt_template": template,
        "params_json": "{}",
        "output_schema_json": "",
        "threshold": "",
    }


@pytest.mark.parametrize(
    ("template", "message"),
    [
        (
            "Judge {output} against {criteria}",
            f"uses {{output}}; write $output (placeholders: {RUBRIC_PLACEHOLDERS})",
        ),
        (
            "Is the answer to $input right?",
            "does not use $output: a rubric judge must be shown the output it grades "
            f"(placeholders: {RUBRIC_PLACEHOLDERS})",
        ),
    ],
)
def test_the_judge_form_shows_a_bad_template_on_its_field(client, carol, template, message):
    client.force_login(carol)
    response = client.post(reverse("judges:version-new"), judge_form(template))
    assert response.status_code == 200
    assert response.context["form"].errors["prompt_template"] == [f"prompt_template: {message}"]
    assert not JudgeVersion.objects.exists()


def test_the_judge_form_creates_a_version_with_a_dollar_template(client, carol):
    client.force_login(carol)
    template = 'Judge $output. Reply {"verdict": "PASS"} or {"verdict": "FAIL"}.'
    response = client.post(reverse("judges:version-new"), judge_form(template))
    assert response.status_code == 302
    assert JudgeVersion.objects.get().prompt_template == template


JUDGE_TOML = """
[[judges]]
name = "helpfulness"
kind = "rubric"
model = "judge-model"
base_url = "http://127.0.0.1:9/v1"
prompt_template = "{template}"
"""

TARGET_TOML = """
[targets.prod]
kind = "openai"
base_url = "https://api.example.com/v1"
model = "m"
prompt_template = "{template}"
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            JUDGE_TOML.format(template="Q {input} A {output}"),
            "judges[0].prompt_template: uses {input}; write $input "
            f"(placeholders: {RUBRIC_PLACEHOLDERS})",
        ),
        (
            JUDGE_TOML.format(template="Pass or fail?"),
            "judges[0].prompt_template: does not use $output: a rubric judge must be shown the "
            f"output it grades (placeholders: {RUBRIC_PLACEHOLDERS})",
        ),
        (TARGET_TOML.format(template="Answer: {input}"), f"targets.prod.prompt_template: {BRACES}"),
        (TARGET_TOML.format(template="Answer."), f"targets.prod.prompt_template: {NO_CASE}"),
    ],
)
def test_apply_config_refuses_a_bad_template_naming_the_entry(tmp_path, text, message):
    path = tmp_path / "assay.toml"
    path.write_text(text)
    with pytest.raises(CommandError) as info:
        call_command("apply_config", str(path))
    assert str(info.value) == message
    assert not JudgeVersion.objects.exists() and not TargetPreset.objects.exists()


def test_apply_config_accepts_dollar_templates(tmp_path):
    path = tmp_path / "assay.toml"
    path.write_text(
        JUDGE_TOML.format(template="Judge $output for ${input}")
        + TARGET_TOML.format(template="Answer: $input")
    )
    call_command("apply_config", str(path), stdout=StringIO())
    assert JudgeVersion.objects.get().prompt_template == "Judge $output for ${input}"
    assert TargetPreset.objects.get().config["prompt_template"] == "Answer: $input"


# -- judge versions stored before the $name syntax ---------------------------------------------

MIGRATION = importlib.import_module("judges.migrations.0005_prompt_template_dollar_syntax")

# The defaults as they were stored before (str.format syntax), frozen here.
OLD_DEFAULTS = {
    "rubric": (
        "Judge the output against the criteria.\n\nCriteria:\n{criteria}\n\n"
        "Case input:\n{input}\n\nReference answer:\n{reference}\n\n"
        "Output to judge:\n{output}\n\n"
        'Reply with one JSON object only: first "reasoning", then "verdict": "PASS" or "FAIL".'
    ),
    "pairwise": (
        "Which response serves the case input better?\n\nCase input:\n{input}\n\n"
        "Response A:\n{response_a}\n\nResponse B:\n{response_b}\n\n"
        'Reply with one JSON object only: first "reasoning", then "verdict": "A" or "B".'
    ),
    "faithfulness": (
        "Is every statement of the answer supported by the documents?\n\n"
        "Documents (ids you may cite: {document_ids}):\n{documents}\n\n"
        "Answer:\n{output}\n\n"
        'Reply with one JSON object only: first "reasoning", then "verdict": "PASS" (all '
        'supported) or "FAIL".'
    ),
    "faithfulness_claims": (
        "Split the answer into its factual claims and mark each supported or not by the "
        "documents, citing the id of the supporting document (null when unsupported).\n\n"
        "Documents (ids you may cite: {document_ids}):\n{documents}\n\n"
        "Answer:\n{output}\n\n"
        'Reply with one JSON object only: first "reasoning", then "claims": '
        '[{{"claim", "supported", "doc_id"}}].'
    ),
    "context_relevance": (
        "For each document, say whether it is relevant to the question.\n\n"
        "Question:\n{input}\n\nDocuments (ids: {document_ids}):\n{documents}\n\n"
        'Reply with one JSON object only: first "reasoning", then "documents": '
        '[{{"doc_id", "relevant"}}], one per id.'
    ),
}


@pytest.mark.parametrize("kind", sorted(OLD_DEFAULTS))
def test_the_migration_turns_each_old_default_into_the_new_default(kind):
    assert MIGRATION.dollar_from_braces(OLD_DEFAULTS[kind]) == kinds.DEFAULT_TEMPLATES[kind]
    assert MIGRATION.braces_from_dollar(kinds.DEFAULT_TEMPLATES[kind]) == OLD_DEFAULTS[kind]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Judge {output} in $ for {input}s", "Judge $output in $$ for ${input}s"),
        ('{{"a": 1}} {output}', '{"a": 1} $output'),
        ("no placeholder at all", "no placeholder at all"),
    ],
)
def test_the_migration_rewrites_a_template_to_render_the_same_text(old, new):
    assert MIGRATION.dollar_from_braces(old) == new
    values = {"output": "O", "input": "I"}
    assert prompt_render(new, trusted=values, data={}).user == old.format(**values)


def test_the_migration_keeps_an_old_version_grading_with_its_trust():
    with FakeLLM(responder=lambda body: verdict_json("PASS")) as llm:
        version = legacy(make_version(llm), OLD_DEFAULTS["rubric"])
        trust(version)
        assert template_refusal(version).startswith("bad_template: prompt_template: uses {")
        MIGRATION.forwards(apps, None)
        version = JudgeVersion.objects.select_related("judge").get(pk=version.pk)
        assert version.is_trusted
        assert version.prompt_template == kinds.DEFAULT_TEMPLATES["rubric"]
        assert version.content_hash == judge_version_hash(
            model=version.model,
            protocol=version.protocol,
            prompt_template=version.prompt_template,
            params=version.params,
            output_schema=version.output_schema,
            threshold=version.threshold,
            base_url=version.base_url,
        )
        [trial] = make_trials(["Paris"])
        judge_grade_trials(trials=[trial], judge_version=version)
        grade = Grade.objects.get()
        assert (grade.passed, grade.gating) == (True, True)
    MIGRATION.backwards(apps, None)
    version.refresh_from_db()
    assert version.prompt_template == OLD_DEFAULTS["rubric"]


def test_an_old_template_is_never_sent_its_grades_error_naming_the_syntax():
    with FakeLLM(responder=lambda body: verdict_json("PASS")) as llm:
        version = legacy(make_version(llm), "Judge {output}")
        trials = make_trials(["Paris", "Lyon"])
        assert judge_grade_trials(trials=trials, judge_version=version) == 2
        assert llm.requests == 0
    reasons = set(Grade.objects.values_list("status", "passed", "reason"))
    assert reasons == {
        (
            "error",
            None,
            "bad_template: prompt_template: uses {output}; write $output "
            f"(placeholders: {RUBRIC_PLACEHOLDERS}); make a new version with the template fixed",
        )
    }


def test_a_run_does_not_start_with_a_judge_whose_template_is_refused(suite):
    with FakeLLM() as llm:
        version = legacy(make_version(llm), "Judge {output}")
    judge = {"key": "judge", "kind": "judge", "config": {"judge_version": str(version.uuid)}}
    with pytest.raises(DomainError) as info:
        run_start(
            suite=suite,
            name="r",
            target={"kind": "simulated", "seed": 1},
            graders=[*GRADERS, judge],
            trials_per_case=1,
        )
    assert str(info.value).startswith(
        "graders[1].config.judge_version: j v1 cannot grade: its prompt_template: uses "
        "{output}; write $output"
    )
    assert not Run.objects.exists()


def test_a_pairwise_judge_with_an_old_template_errors_both_orders_without_a_call():
    with FakeLLM(responder=lambda body: verdict_json("A")) as llm:
        version = legacy(make_version(llm, kind="pairwise"), OLD_DEFAULTS["pairwise"])
        a, b = make_trials(["Paris", "Paris, France"])
        pair = TrialPair.objects.create(trial_a=a, trial_b=b, case=a.case)
        outcome = pair_judge(pair=pair, judge_version=version)
        assert llm.requests == 0
    assert outcome.winner is None
    assert set(PairwiseVerdict.objects.values_list("status", flat=True)) == {"error"}
    reasons = PairwiseVerdict.objects.values_list("reason", flat=True)
    assert all("prompt_template: uses {input}; write $input" in r for r in reasons)


def test_probes_are_not_started_against_an_old_template():
    with FakeLLM() as llm:
        version = legacy(make_version(llm), "Judge {output}")
    with pytest.raises(DomainError, match=r"^j v1: bad_template: prompt_template: uses"):
        probe_run_start(judge_version=version)
    assert not ProbeRun.objects.exists()
