"""A judge version naming ``"provider": "anthropic"`` in its params, end to end against the
shared mock's ``POST /v1/messages`` (``judge_run`` with eager Celery): the predicted verdicts,
529s retried, a forced tool's ``tool_use`` read and its absence an errored grade, pairwise
judging and probes on the same client; and on a fake transport the body it sends and the
honest client's refusals (a repeated key, a refusal, a tool input that is not an object)."""

from __future__ import annotations

import asyncio
import json
import re
import tomllib
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from multidict import CIMultiDict

from core.errors import DomainError
from evals.models import Case, Grade, Run, Suite, Trial
from judges import client as judge_client
from judges import kinds
from judges.client import ANSWER_TOOL, JudgeClient
from judges.models import JudgeRun, PairwiseVerdict
from judges.probes import probe_run
from judges.versions import judge_version_create
from providers.transport import HttpAnswer
from tests.conftest import PROJECT_DIR
from tests.judge_builders import judge_grade_one
from tests.mockllm import mockllm  # noqa: F401 - the fixture

KEY = "test-anthropic-judge-key"
KEY_ENV = "ASSAY_ANTHROPIC_JUDGE_TEST_API_KEY"


def _params(**extra) -> dict:
    return {
        "provider": "anthropic",
        "api_key_env": KEY_ENV,
        "max_tokens": 256,
        "max_attempts": 1,
        **extra,
    }


def _version(base_url: str, *, name="claude-judge", kind="rubric", model="mock-judge", **params):
    version, _ = judge_version_create(
        judge_name=name,
        kind=kind,
        model=model,
        base_url=base_url,
        prompt_template="",
        params=_params(**params),
        output_schema={},
    )
    return version


def _run(n: int, *, name="R1", suite="S", documents=None) -> Run:
    """A finished run of ``n`` ok trials on cases carrying the mock's marker; odd ones answer
    the expected token (the mock's judge passes those, with no flip), even ones do not."""
    s, _ = Suite.objects.get_or_create(name=suite)
    run = Run.objects.create(
        suite=s, name=name, target_kind="callable", status=Run.Status.SUCCEEDED
    )
    for i in range(n):
        key = f"m{i:02d}"
        case, _ = Case.objects.get_or_create(
            suite=s,
            key=key,
            defaults={
                "input": f"[case={key} p=0.5 expect=ANSWER-{key}] Capital?",
                "context": documents or [],
            },
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


@pytest.fixture
def no_sleep(monkeypatch):
    async def fake_sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(judge_client, "default_sleep", fake_sleep)


# --- against the shared mock ------------------------------------------------------------------

on_the_mock = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@on_the_mock
def test_a_judge_run_on_anthropic_gives_the_predicted_verdicts(mockllm, monkeypatch):  # noqa: F811
    """The mock refuses a call without ``anthropic-version`` or with another key (401), so
    every verdict means both were sent; every call went to ``/v1/messages``."""
    monkeypatch.setenv(KEY_ENV, KEY)
    server = mockllm("--latency-ms", "0", "--judge-flip", "0", "--anthropic-api-key", KEY)
    run = _run(8)
    _version(server.base_url)

    code, text = _judge_run(str(run.uuid), "claude-judge")

    judge_run = JudgeRun.objects.get()
    assert (code, judge_run.status, judge_run.trials_graded, judge_run.trials_errored) == (
        0,
        "succeeded",
        8,
        0,
    ), text
    grades = Grade.objects.filter(grader=judge_run.grader).select_related("trial")
    assert {g.trial.output.startswith("ANSWER") for g in grades if g.passed} == {True}
    assert sorted(g.passed for g in grades) == [False] * 4 + [True] * 4
    stats = server.stats()
    assert stats["by_api"]["anthropic"]["requests"] == 8
    assert stats["by_api"]["openai"]["requests"] == 0
    grade = grades.first()
    assert grade.details["input_tokens"] > 0 and grade.details["output_tokens"] > 0
    assert grade.details["model"] == "mock-judge"


@on_the_mock
def test_529_overloaded_answers_are_retried_and_the_verdicts_hold(mockllm, monkeypatch, no_sleep):  # noqa: F811
    monkeypatch.setenv(KEY_ENV, KEY)
    server = mockllm("--latency-ms", "0", "--judge-flip", "0", "--p529", "0.4")
    run = _run(8)
    _version(server.base_url, max_attempts=20)

    code, text = _judge_run(str(run.uuid), "claude-judge")

    judge_run = JudgeRun.objects.get()
    assert (code, judge_run.status, judge_run.trials_errored) == (0, "succeeded", 0), text
    assert Grade.objects.filter(grader=judge_run.grader, passed=True).count() == 4
    status = server.stats()["by_api"]["anthropic"]["status"]
    assert int(status.get("529", 0)) > 0


@on_the_mock
def test_529s_to_the_last_attempt_are_a_server_error_grade_never_a_pass(mockllm, monkeypatch):  # noqa: F811
    monkeypatch.setenv(KEY_ENV, KEY)
    server = mockllm("--latency-ms", "0", "--p529", "1")
    trial = Trial.objects.get(run=_run(1))
    grade = judge_grade_one(trial=trial, judge_version=_version(server.base_url))
    assert (grade.status, grade.passed, grade.reason) == ("error", None, "server_error")
    assert "Overloaded" in grade.details["provider_message"]


@on_the_mock
def test_a_reply_without_the_forced_tool_use_is_an_errored_grade(mockllm, monkeypatch):  # noqa: F811
    """A context-relevance judge constrains document ids: its call forces the answer tool. The
    mock's judge answers in text, never with a tool: every grade is an error, never a pass."""
    monkeypatch.setenv(KEY_ENV, KEY)
    server = mockllm("--latency-ms", "0")
    trial = Trial.objects.get(run=_run(1, documents=[{"id": "kb-7", "text": "Paris."}]))
    version = _version(server.base_url, kind="context_relevance")
    grade = judge_grade_one(trial=trial, judge_version=version)
    assert (grade.status, grade.passed, grade.score, grade.reason) == (
        "error",
        None,
        None,
        "unparseable",
    )
    assert (
        f"no tool_use block for the forced tool '{ANSWER_TOOL}'"
        in (grade.details["provider_message"])
    )
    assert grade.details["raw_response"]["stop_reason"] == "end_turn"


@on_the_mock
def test_the_forced_tools_input_is_the_answer_with_its_enum_of_ids(mockllm, monkeypatch):  # noqa: F811
    """The mock, scripted as an agent (``--agent correct``), answers a non-judge model by
    calling the first declared tool with arguments drawn from its schema: ``doc_id`` is the
    enum's first id, so the grade reads the one document as relevant."""
    monkeypatch.setenv(KEY_ENV, KEY)
    server = mockllm("--latency-ms", "0", "--agent", "correct")
    trial = Trial.objects.get(run=_run(1, documents=[{"id": "kb-7", "text": "Paris."}]))
    version = _version(server.base_url, kind="context_relevance", model="mock-model")
    grade = judge_grade_one(trial=trial, judge_version=version)
    assert (grade.status, grade.passed, grade.score) == ("ok", True, 1.0), grade.details
    assert grade.details["documents_relevance"] == [
        {"doc_id": "doc-1", "source_id": "kb-7", "relevant": True}
    ]
    assert json.loads(grade.details["raw_reply"]) == {
        "reasoning": "mock",
        "documents": [{"doc_id": "doc-1", "relevant": True}],
    }
    assert server.stats()["agent"]["tool_calls"] == 1


@on_the_mock
def test_pairwise_judging_runs_on_anthropic(mockllm, monkeypatch):  # noqa: F811
    """Two runs of the same cases judged pairwise (the mock's PASS/FAIL mapped to the slots):
    every presentation answered by ``/v1/messages``, none errored."""
    monkeypatch.setenv(KEY_ENV, KEY)
    server = mockllm("--latency-ms", "0", "--judge-flip", "0")
    base = _run(4, name="base")
    head = _run(4, name="head")
    _version(
        server.base_url,
        name="claude-pref",
        kind="pairwise",
        verdict_slots={"PASS": "A", "FAIL": "B"},
    )

    code, text = _judge_run("--pairwise", str(base.uuid), str(head.uuid), "claude-pref")

    judge_run = JudgeRun.objects.get(base_run=base, run=head)
    assert (code, judge_run.status, judge_run.trials_graded, judge_run.trials_errored) == (
        0,
        "succeeded",
        4,
        0,
    ), text
    verdicts = PairwiseVerdict.objects.filter(judge_version__judge__name="claude-pref")
    assert verdicts.count() == 8 and not verdicts.exclude(status="ok").exists()
    assert server.stats()["by_api"]["anthropic"]["requests"] == 8


@on_the_mock
def test_probes_run_on_an_anthropic_judge(mockllm, monkeypatch):  # noqa: F811
    monkeypatch.setenv(KEY_ENV, KEY)
    server = mockllm("--latency-ms", "0")
    version = _version(server.base_url)
    report = probe_run(judge_version=version)
    assert report.errored == 0 and report.judged == len(report.results) > 0
    assert server.stats()["by_api"]["anthropic"]["requests"] == report.judged


@on_the_mock
def test_the_docs_pages_judge_config_runs_against_the_mock_as_written(
    mockllm,  # noqa: F811
    monkeypatch,
    tmp_path,
):
    """docs/providers/anthropic.md's TOML applied with ``apply_config``, only ``base_url``
    pointed at the mock (in judge mode, whatever the model's name): the key read from
    ``ANTHROPIC_API_KEY``, ``judge_run`` gives the predicted verdicts."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    server = mockllm(
        "--mode", "judge", "--latency-ms", "0", "--judge-flip", "0", "--anthropic-api-key", KEY
    )
    text = (PROJECT_DIR / "docs" / "providers" / "anthropic.md").read_text()
    [toml] = re.findall(r"```toml\n(.*?)```", text, re.DOTALL)
    official = "https://api.anthropic.com/v1"
    [judge] = tomllib.loads(toml)["judges"]
    assert judge["base_url"] == official and judge["params"]["provider"] == "anthropic"
    config = tmp_path / "assay.toml"
    config.write_text(toml.replace(official, server.base_url))
    call_command("apply_config", str(config), stdout=StringIO())
    run = _run(6)

    code, out = _judge_run(str(run.uuid), judge["name"])

    judge_run = JudgeRun.objects.get()
    assert (code, judge_run.status, judge_run.trials_errored) == (0, "succeeded", 0), out
    grades = Grade.objects.filter(grader=judge_run.grader).select_related("trial")
    assert sorted((g.trial.output.startswith("ANSWER"), g.passed) for g in grades) == (
        [(False, False)] * 3 + [(True, True)] * 3
    )
    assert judge_run.judge_version.model == judge["model"]
    assert server.stats()["by_api"]["anthropic"]["requests"] == 6


# --- the version's config ---------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"max_tokens": None}, "params.max_tokens", "required by Anthropic's Messages API"),
        ({"max_tokens": 0}, "params.max_tokens", "at least 1"),
        ({"system": "x"}, "params.system", "set by Assay"),
        ({"tool_choice": {"type": "auto"}}, "params.tool_choice", "set by Assay"),
        ({"provider": "bedrock"}, "params.provider", "known: openai, anthropic, azure"),
        ({"anthropic_version": "2023 06"}, "params.anthropic_version", "expected an API version"),
        ({"api_key_env": "SECRET_KEY"}, "params.api_key_env", "not an API key variable"),
    ],
)
def test_a_bad_anthropic_judge_version_is_refused_naming_the_field(change, field, says):
    params = {k: v for k, v in {**_params(), **change}.items() if v is not None}
    with pytest.raises(DomainError) as caught:
        judge_version_create(
            judge_name="j",
            kind="rubric",
            model="claude-test-1",
            base_url="http://127.0.0.1:9/v1",
            prompt_template="",
            params=params,
            output_schema={},
        )
    assert caught.value.field == field
    assert says in caught.value.message


@pytest.mark.django_db
def test_anthropic_version_is_refused_on_an_openai_judge():
    with pytest.raises(DomainError) as caught:
        judge_version_create(
            judge_name="j",
            kind="rubric",
            model="gpt-test",
            base_url="http://127.0.0.1:9/v1",
            prompt_template="",
            params={"anthropic_version": "2023-06-01"},
            output_schema={},
        )
    assert caught.value.field == "params.anthropic_version"


@pytest.mark.django_db
def test_the_version_form_creates_an_anthropic_judge_and_names_a_missing_max_tokens(client, carol):
    from django.urls import reverse  # noqa: PLC0415

    from judges.models import JudgeVersion  # noqa: PLC0415
    from tests.conftest import PASSWORD  # noqa: PLC0415

    assert client.login(username=carol.username, password=PASSWORD)
    data = {
        "name": "claude",
        "kind": "rubric",
        "base_url": "https://api.anthropic.com/v1",
        "model": "claude-sonnet-4-5",
        "prompt_template": "",
        "output_schema_json": "",
        "threshold": "",
    }
    refused = client.post(
        reverse("judges:version-new"), {**data, "params_json": '{"provider": "anthropic"}'}
    )
    assert "required by Anthropic&#x27;s Messages API" in refused.content.decode()
    assert not JudgeVersion.objects.exists()
    params = {"provider": "anthropic", "max_tokens": 1024, "temperature": 0}
    client.post(reverse("judges:version-new"), {**data, "params_json": json.dumps(params)})
    assert JudgeVersion.objects.get().params == params


# --- the body and the answers, on a fake transport --------------------------------------------


class FakePoster:
    def __init__(self, reply) -> None:
        self.reply = reply
        self.bodies: list[dict] = []

    async def post(self, body: dict) -> HttpAnswer:
        self.bodies.append(body)
        text = self.reply if isinstance(self.reply, str) else json.dumps(self.reply)
        return HttpAnswer(status=200, headers=CIMultiDict(), text=text)

    async def aclose(self) -> None:
        pass


def _message(*blocks: dict, stop_reason="end_turn") -> dict:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-1",
        "content": list(blocks),
        "stop_reason": stop_reason,
        "usage": {"input_tokens": 10, "output_tokens": 4},
    }


def _tool_use(tool_input) -> dict:
    return {"type": "tool_use", "id": "toolu_1", "name": ANSWER_TOOL, "input": tool_input}


def _call(kind: str, reply, *, documents=(), **params):
    """One call of a ``kind`` judge through ``JudgeClient`` answered with ``reply``:
    ``(JudgeReply, built call)``."""
    built = kinds.call_build(
        kind=kind,
        template=kinds.DEFAULT_TEMPLATES[kind],
        criteria="",
        material=kinds.Material(output="Paris", input="Capital?", documents=list(documents)),
        output_schema=None,
        threshold=None,
    )

    async def go():
        client = JudgeClient(
            base_url="http://127.0.0.1:9/v1", model="claude-test-1", params=_params(**params)
        )
        poster = FakePoster(reply)
        client._client.http = poster
        try:
            return await client.complete(messages=built.prompt.messages(), schema=built.schema)
        finally:
            await client.aclose()

    return asyncio.run(go()), built


def _body(kind: str, *, documents=(), **params) -> dict:
    built = kinds.call_build(
        kind=kind,
        template=kinds.DEFAULT_TEMPLATES[kind],
        criteria="",
        material=kinds.Material(output="Paris", input="Capital?", documents=list(documents)),
        output_schema=None,
        threshold=None,
    )
    client = JudgeClient(
        base_url="http://127.0.0.1:9/v1", model="claude-test-1", params=_params(**params)
    )
    return client.request_body(messages=built.prompt.messages(), schema=built.schema)


DOCS = [{"id": "kb-1", "text": "Paris is the capital."}]


def test_the_body_has_the_system_message_apart_and_a_verdict_judge_answers_in_text():
    body = _body("rubric", temperature=0)
    assert list(body) == ["model", "max_tokens", "system", "messages", "temperature"]
    assert body["system"].startswith("You are an evaluator.")
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert re.search(r"<<<DATA-[0-9a-f]{32}>>>", body["messages"][0]["content"])
    assert "tools" not in body and "response_format" not in body
    for name in ("provider", "api_key_env", "max_attempts"):
        assert name not in body


@pytest.mark.parametrize("kind", ["context_relevance", "faithfulness_claims"])
def test_a_judge_citing_document_ids_is_forced_to_answer_with_the_tool_holding_the_enum(kind):
    body = _body(kind, documents=DOCS)
    assert body["tool_choice"] == {"type": "tool", "name": ANSWER_TOOL}
    [tool] = body["tools"]
    assert tool["name"] == ANSWER_TOOL
    schema = tool["input_schema"]
    assert schema == kinds.default_schema(kind, ids=["doc-1"])
    assert "doc-1" in json.dumps(schema)


def test_structured_output_off_sends_no_tool():
    body = _body("context_relevance", documents=DOCS, structured_output=False)
    assert "tools" not in body and "tool_choice" not in body


def test_the_tool_input_is_read_as_the_reply_text():
    answer = {"reasoning": "r", "documents": [{"doc_id": "doc-1", "relevant": True}]}
    reply, _ = _call(
        "context_relevance",
        _message(
            {"type": "text", "text": "Let me see."}, _tool_use(answer), stop_reason="tool_use"
        ),
        documents=DOCS,
    )
    assert reply.ok and json.loads(reply.content) == answer
    assert (reply.input_tokens, reply.output_tokens) == (10, 4)


@pytest.mark.parametrize(
    ("reply", "reason", "says"),
    [
        # a key twice in the tool's input: the last one must not win
        (
            '{"type": "message", "content": [{"type": "tool_use", "id": "t", "name": "'
            + ANSWER_TOOL
            + '", "input": {"reasoning": "r", "documents": [], "documents": []}}], '
            '"stop_reason": "tool_use"}',
            "unparseable",
            "appears twice",
        ),
        (_message(_tool_use("{not json")), "unparseable", "not an object"),
        (_message({"type": "text", "text": "{}"}), "unparseable", "no tool_use block"),
        (_message(), "empty", "no tool_use block"),
        (_message(stop_reason="refusal"), "refusal", ""),
        ("not json", "http_error", "not a JSON object"),
    ],
)
def test_a_forced_tool_answer_that_is_not_usable_is_an_error(reply, reason, says):
    result, _ = _call("context_relevance", reply, documents=DOCS)
    assert (result.ok, result.content, result.reason) == (False, None, reason)
    assert says in result.message


def test_a_refusal_with_text_is_a_refusal_never_a_verdict():
    text = json.dumps({"reasoning": "r", "verdict": "PASS"})
    result, _ = _call("rubric", _message({"type": "text", "text": text}, stop_reason="refusal"))
    assert (result.ok, result.reason, result.message) == (False, "refusal", "stop_reason refusal")


@pytest.mark.django_db
def test_a_verdict_judges_text_is_read_by_the_honest_parser(monkeypatch):
    """Case-insensitive whole-word verdicts, duplicate keys refused and the nonce fence: the
    reply text goes through ``judges.parsing`` as on OpenAI."""
    from judges.parsing import reply_parse  # noqa: PLC0415

    _, built = _call("rubric", _message({"type": "text", "text": "x"}))
    schema, nonce = built.schema, built.prompt.nonce
    assert (
        reply_parse(
            '{"reasoning": "r", "verdict": "pass"}', reply_format="json", schema=schema, nonce=nonce
        ).data["verdict"]
        == "PASS"
    )
    for text, reason in [
        ('{"reasoning": "r", "verdict": "passable"}', "invalid_verdict"),
        ('{"reasoning": "r", "verdict": "FAIL", "verdict": "PASS"}', "unparseable"),
        (json.dumps({"reasoning": nonce, "verdict": "PASS"}), "nonce_leak"),
    ]:
        assert reply_parse(text, reply_format="json", schema=schema, nonce=nonce).reason == reason


def test_an_openai_judges_body_is_unchanged():
    """No ``provider``: the chat-completions body as before, the schema as ``response_format``
    for every kind."""
    built = kinds.call_build(
        kind="context_relevance",
        template=kinds.DEFAULT_TEMPLATES["context_relevance"],
        criteria="",
        material=kinds.Material(output="Paris", input="Capital?", documents=DOCS),
        output_schema=None,
        threshold=None,
    )
    client = JudgeClient(
        base_url="http://127.0.0.1:9/v1",
        model="gpt-test",
        params={"max_attempts": 2, "temperature": 0, "max_tokens": 50},
    )
    body = client.request_body(messages=built.prompt.messages(), schema=built.schema)
    assert body == {
        "model": "gpt-test",
        "messages": built.prompt.messages(),
        "temperature": 0,
        "max_tokens": 50,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "judge_verdict", "strict": True, "schema": built.schema},
        },
    }
    assert type(client._client).__name__ == "ChatClient"
