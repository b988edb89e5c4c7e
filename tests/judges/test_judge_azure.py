"""A judge version naming ``"provider": "azure"`` in its params, end to end through the test-side
Azure front (``tests.azure_front``): the predicted verdicts from the shared mock's judge mode, a
judge citing document ids answering through ``response_format`` with the ids as an ``enum`` (an id
outside them an errored grade), Azure's refusals as errored grades, and the version's Azure
params refused by field name."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from core.errors import DomainError
from evals.models import Case, Grade, Run, Suite, Trial
from judges.client import JudgeClient
from judges.models import JudgeRun
from judges.probes import probe_run
from judges.versions import judge_version_create
from tests.azure_front import NO_DEPLOYMENT, AzureFront
from tests.fakellm import fake_llm  # noqa: F401 - the fixture
from tests.judge_builders import judge_grade_one
from tests.mockllm import mockllm  # noqa: F401 - the fixture

KEY = "azure-judge-test-key"
KEY_ENV = "ASSAY_AZURE_JUDGE_TEST_API_KEY"
DOCS = [{"id": "kb-7", "text": "Paris is the capital."}]


def _params(**extra) -> dict:
    return {
        "provider": "azure",
        "deployment": "judge",
        "api_version": "2024-10-21",
        "api_key_env": KEY_ENV,
        "max_attempts": 1,
        "temperature": 0,
        **extra,
    }


def _version(base_url: str, *, name="azure-judge", kind="rubric", **params):
    version, _ = judge_version_create(
        judge_name=name,
        kind=kind,
        model="gpt-4o",
        base_url=base_url,
        prompt_template="",
        params=_params(**params),
        output_schema={},
    )
    return version


def _run(n: int, *, documents=None) -> Run:
    """A finished run of ``n`` ok trials carrying the mock's marker; odd ones answer the expected
    token (the mock's judge passes those, with no flip), even ones do not."""
    suite = Suite.objects.create(name="S")
    run = Run.objects.create(
        suite=suite, name="R1", target_kind="callable", status=Run.Status.SUCCEEDED
    )
    for i in range(n):
        key = f"m{i:02d}"
        case = Case.objects.create(
            suite=suite,
            key=key,
            input=f"[case={key} p=0.5 expect=ANSWER-{key}] Capital?",
            context=documents or [],
        )
        output = f"ANSWER-{key}" if i % 2 else "WRONG"
        Trial.objects.create(run=run, case=case, attempt=1, status="ok", output=output)
    return run


def _judge_run(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("judge_run", *args, "--wait", "--timeout", "30", stdout=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue() + str(exc)
    return 0, out.getvalue()


on_the_mock = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@on_the_mock
def test_a_judge_run_on_azure_gives_the_predicted_verdicts(mockllm, monkeypatch):  # noqa: F811
    """The front refuses another key (401) and an unknown deployment (404): every verdict means
    the deployment's URL, the ``api-version`` and the ``api-key`` were sent. The deployment
    serves ``mock-judge`` (the mock's judge mode), whatever the body's ``model``."""
    monkeypatch.setenv(KEY_ENV, KEY)
    server = mockllm("--latency-ms", "0", "--judge-flip", "0")
    run = _run(8)
    with AzureFront(server.base_url, deployments={"judge": "mock-judge"}, api_key=KEY) as front:
        _version(front.base_url)
        code, text = _judge_run(str(run.uuid), "azure-judge")

    judge_run = JudgeRun.objects.get()
    assert (code, judge_run.status, judge_run.trials_graded, judge_run.trials_errored) == (
        0,
        "succeeded",
        8,
        0,
    ), text
    grades = Grade.objects.filter(grader=judge_run.grader).select_related("trial")
    assert sorted((g.trial.output.startswith("ANSWER"), g.passed) for g in grades) == (
        [(False, False)] * 4 + [(True, True)] * 4
    )
    assert grades.first().details["model"] == "mock-judge"  # the model the reply names
    assert len(front.requests) == 8
    sent = front.requests[0]
    assert sent["path"] == "/openai/deployments/judge/chat/completions"
    assert sent["query"] == {"api-version": "2024-10-21"}
    assert sent["headers"]["api-key"] == KEY and "authorization" not in sent["headers"]
    body = sent["body"]
    assert body["model"] == "gpt-4o" and body["temperature"] == 0
    assert body["response_format"]["type"] == "json_schema"
    for name in ("provider", "deployment", "api_version", "api_key_env", "max_attempts"):
        assert name not in body


@pytest.mark.django_db
def test_a_judge_citing_document_ids_answers_through_response_format_with_the_enum(
    fake_llm,  # noqa: F811
    monkeypatch,
):
    """As on OpenAI: the offered ids are an ``enum`` in ``response_format``'s schema; an answer
    with an offered id grades, one with another id is an errored grade (``unknown_id``)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    answers = iter(
        [
            {"reasoning": "r", "documents": [{"doc_id": "doc-1", "relevant": True}]},
            {"reasoning": "r", "documents": [{"doc_id": "kb-7", "relevant": True}]},
        ]
    )
    fake_llm.responder = lambda body: json.dumps(next(answers))
    trial = Trial.objects.get(run=_run(1, documents=DOCS))
    with AzureFront(fake_llm.base_url, deployments={"judge": "gpt-4o"}, api_key=KEY) as front:
        version = _version(front.base_url, kind="context_relevance")
        grade = judge_grade_one(trial=trial, judge_version=version)
        Grade.objects.all().delete()
        unknown = judge_grade_one(trial=trial, judge_version=version)

    assert (grade.status, grade.passed, grade.score) == ("ok", True, 1.0), grade.details
    assert grade.details["documents_relevance"] == [
        {"doc_id": "doc-1", "source_id": "kb-7", "relevant": True}
    ]
    assert (unknown.status, unknown.passed, unknown.reason) == ("error", None, "unknown_id")
    response_format = front.requests[0]["body"]["response_format"]
    assert response_format["json_schema"]["strict"] is True
    schema = response_format["json_schema"]["schema"]
    assert schema["properties"]["documents"]["items"]["properties"]["doc_id"] == {"enum": ["doc-1"]}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "reason", "says"),
    [
        ({"deployment": "gone"}, "http_error", NO_DEPLOYMENT),
        ({"api_key_env": "ASSAY_AZURE_WRONG_API_KEY"}, "http_error", "Access denied"),
    ],
)
def test_azures_refusals_are_errored_grades_never_a_pass(
    fake_llm,  # noqa: F811
    monkeypatch,
    params,
    reason,
    says,
):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("ASSAY_AZURE_WRONG_API_KEY", "not-the-key")
    trial = Trial.objects.get(run=_run(1))
    with AzureFront(fake_llm.base_url, deployments={"judge": "gpt-4o"}, api_key=KEY) as front:
        grade = judge_grade_one(trial=trial, judge_version=_version(front.base_url, **params))
    assert (grade.status, grade.passed, grade.reason) == ("error", None, reason)
    assert says in grade.details["provider_message"]
    assert KEY not in json.dumps(grade.details) and "not-the-key" not in json.dumps(grade.details)
    assert fake_llm.requests == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"deployment": None}, "params.deployment", 'required with "provider": "azure"'),
        ({"deployment": "../admin"}, "params.deployment", "is not a deployment name"),
        ({"api_version": None}, "params.api_version", 'required with "provider": "azure"'),
        ({"api_version": "v1"}, "params.api_version", "expected an API version"),
        ({"provider": "openai"}, "params.deployment", 'only with "provider": "azure"'),
        ({"anthropic_version": "2023-06-01"}, "params.anthropic_version", "only with"),
    ],
)
def test_a_bad_azure_judge_version_is_refused_naming_the_field(change, field, says):
    params = {k: v for k, v in {**_params(), **change}.items() if v is not None}
    with pytest.raises(DomainError) as caught:
        judge_version_create(
            judge_name="j",
            kind="rubric",
            model="gpt-4o",
            base_url="https://myres.openai.azure.com",
            prompt_template="",
            params=params,
            output_schema={},
        )
    assert caught.value.field == field
    assert says in caught.value.message


def test_an_azure_judge_reads_azure_openai_api_key_unless_told():
    params = {k: v for k, v in _params().items() if k != "api_key_env"}
    client = JudgeClient(base_url="https://myres.openai.azure.com", model="gpt-4o", params=params)
    assert client._client.config.api_key_env == "AZURE_OPENAI_API_KEY"
    assert type(client._client).__name__ == "AzureChatClient"
    assert str(client._client.http.url) == (
        "https://myres.openai.azure.com/openai/deployments/judge/chat/completions"
        "?api-version=2024-10-21"
    )


@pytest.mark.django_db
def test_the_version_form_creates_an_azure_judge_and_names_a_missing_deployment(client, carol):
    from django.urls import reverse  # noqa: PLC0415

    from judges.models import JudgeVersion  # noqa: PLC0415
    from tests.conftest import PASSWORD  # noqa: PLC0415

    assert client.login(username=carol.username, password=PASSWORD)
    data = {
        "name": "azure",
        "kind": "rubric",
        "base_url": "https://myres.openai.azure.com",
        "model": "gpt-4o",
        "prompt_template": "",
        "output_schema_json": "",
        "threshold": "",
    }
    refused = client.post(
        reverse("judges:version-new"),
        {**data, "params_json": '{"provider": "azure", "api_version": "2024-10-21"}'},
    )
    page = refused.content.decode()
    assert "params.deployment" in page and "required with" in page
    assert not JudgeVersion.objects.exists()
    params = {"provider": "azure", "deployment": "judge", "api_version": "2024-10-21"}
    client.post(reverse("judges:version-new"), {**data, "params_json": json.dumps(params)})
    assert JudgeVersion.objects.get().params == params


@on_the_mock
def test_probes_run_on_an_azure_judge(mockllm, monkeypatch):  # noqa: F811
    monkeypatch.setenv(KEY_ENV, KEY)
    server = mockllm("--latency-ms", "0")
    with AzureFront(server.base_url, deployments={"judge": "mock-judge"}, api_key=KEY) as front:
        version = _version(front.base_url)
        report = probe_run(judge_version=version)
        sent = len(front.requests)
    assert report.errored == 0 and report.judged == len(report.results) > 0
    assert sent == server.stats()["requests"] == report.judged
