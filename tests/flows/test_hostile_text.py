"""Hostile text on every path (issue 13, item 8): U+0000 (NUL) and lone surrogates.

One boundary rule (``core.text``): model and judge replies have them replaced with U+FFFD
and the trial or grade says so; files, API bodies and form posts are refused naming the
record and the field. Each path is tried with both kinds, as a JSON escape (``"\\\\u0000"``,
``"\\\\ud800"``) and, where a file or an HTTP body is involved, as raw bytes. The same
answers on SQLite and PostgreSQL (PostgreSQL refuses NUL in text, SQLite stores it).
"""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from types import SimpleNamespace

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone

from core.errors import DomainError
from core.registry import registered
from core.text import REPLACED_KEY, UNSTORABLE, contains_unstorable
from evals.comparison.run_document import run_document_read
from evals.models import Case, Grade, Run, Suite, Trial
from evals.runner.start import run_start
from evals.runner.sweeper import runs_sweep
from interop.run_file import run_export
from judges import runs
from judges.management.commands import judge_run as judge_run_command
from judges.models import JudgeRun, JudgeVersion
from labeling.models import CalibrationSet
from tests.comparison_builders import db_run, judge_version
from tests.conftest import PASSWORD, PROJECT_DIR
from tests.core.test_api_core import client_for
from tests.fakellm import FakeLLM
from tests.import_helpers import import_bytes, jsonl, record
from tests.judge_builders import make_trials, make_version
from tests.labeling_builders import calibration_set, judged_run

pytestmark = pytest.mark.django_db

NUL, SURROGATE = "\x00", "\ud800"
KINDS = [pytest.param(NUL, id="nul"), pytest.param(SURROGATE, id="surrogate")]
# The same two as a JSON document spells them (an escape inside a string).
ESCAPES = [pytest.param("\\u0000", id="nul"), pytest.param("\\ud800", id="surrogate")]
GRADERS = [{"key": "says-yes", "kind": "regex", "config": {"pattern": "^yes"}}]


def stored_text_is_clean(run: Run) -> None:
    """Nothing the database cannot hold was written for ``run``'s trials and grades."""
    for trial in Trial.objects.filter(run=run):
        assert not contains_unstorable([trial.output, trial.raw_response, trial.error_message])
    for grade in Grade.objects.filter(trial__run=run):
        assert not contains_unstorable([grade.reason, grade.details])


@pytest.fixture
def llm():
    server = FakeLLM(retry_after="0", hang_s=5.0)
    server.start()
    yield server
    server.stop()


def one_case_run(django_capture_on_commit_callbacks, target: dict, graders=GRADERS) -> Run:
    suite = Suite.objects.create(name="hostile")
    Case.objects.create(suite=suite, key="c1", input="question", expected="yes")
    with django_capture_on_commit_callbacks(execute=True):
        run = run_start(suite=suite, name="r", target=target, graders=graders, trials_per_case=2)
    run.refresh_from_db()
    return run


def completion(content_json: str) -> bytes:
    """A chat-completions 200 body whose content is the JSON string literal given."""
    return (
        '{"id": "x", "model": "fake-model", "choices": [{"index": 0, "message": '
        '{"role": "assistant", "content": ' + content_json + '}, "finish_reason": "stop"}], '
        '"usage": {"prompt_tokens": 3, "completion_tokens": 2}}'
    ).encode()


# -- 1. model replies: replaced with U+FFFD, the trial says so, the run finishes ----------


@pytest.mark.parametrize("escape", ESCAPES)
def test_a_model_reply_escaping_one_is_stored_with_a_replacement_and_the_run_finishes(
    llm, client, carol, escape, django_capture_on_commit_callbacks
):
    llm.responder = lambda body: completion(f'"yes {escape} here"')
    run = one_case_run(django_capture_on_commit_callbacks, llm.target(model="fake-model"))

    assert run.status == Run.Status.SUCCEEDED
    assert (run.trials_finished, run.trials_errored) == (2, 0)
    assert llm.requests == 2  # nothing is left running to be called again
    with django_capture_on_commit_callbacks(execute=True):
        swept = runs_sweep(now=timezone.now() + timedelta(days=1))  # every lease long over
    assert (swept.trials, swept.chunks, llm.requests) == (0, 0, 2)
    trial = Trial.objects.filter(run=run).first()
    assert trial.status == Trial.Status.OK
    assert trial.output == "yes \ufffd here"
    assert trial.raw_response[REPLACED_KEY] == {"output": 1, "raw_response": 1}
    assert Grade.objects.filter(trial__run=run, passed=True).count() == 2
    stored_text_is_clean(run)
    assert client.login(username=carol.username, password=PASSWORD)
    page = client.get(reverse("evals:trial-detail", args=[trial.uuid]))
    assert page.status_code == 200
    assert (
        "The reply held characters the database cannot store (U+0000 or an unpaired "
        "surrogate), replaced with U+FFFD (&#xFFFD;): 1 in output, 1 in raw_response."
    ) in page.content.decode()


def test_a_model_reply_with_a_raw_nul_byte_is_an_errored_trial_stored_clean(
    llm, django_capture_on_commit_callbacks
):
    # A raw NUL inside a JSON string is not JSON: the 200 is malformed, its body kept clean.
    llm.responder = lambda body: completion('"yes \x00 here"')
    run = one_case_run(django_capture_on_commit_callbacks, llm.target(model="fake-model"))

    assert run.status == Run.Status.FAILED
    assert (run.trials_finished, run.trials_errored) == (2, 2)
    assert llm.requests == 2
    trial = Trial.objects.filter(run=run).first()
    assert trial.error_message.startswith("malformed_response: ")
    assert "yes \ufffd here" in trial.raw_response["body"]
    assert trial.raw_response[REPLACED_KEY] == {"raw_response": 1}
    stored_text_is_clean(run)


def test_raw_invalid_utf8_in_a_model_reply_reads_as_replacement_characters(
    llm, django_capture_on_commit_callbacks
):
    # The UTF-8 form a lone surrogate would have (ED A0 80) is not UTF-8: decoded as U+FFFD.
    raw = completion('"yes @@"').replace(b"@@", b"\xed\xa0\x80")
    llm.responder = lambda body: raw
    run = one_case_run(django_capture_on_commit_callbacks, llm.target(model="fake-model"))

    assert run.status == Run.Status.SUCCEEDED
    trial = Trial.objects.filter(run=run).first()
    assert trial.output.startswith("yes \ufffd")
    assert REPLACED_KEY not in trial.raw_response  # nothing unstorable ever reached Python
    stored_text_is_clean(run)


HOSTILE = {"nul": NUL, "surrogate": SURROGATE, "none": ""}


@registered("pipeline")
def hostile_pipeline(case, *, kind: str, shape: str = "str"):
    """A pipeline whose output holds the ``kind`` of character named (run settings cannot
    hold one: run_start refuses it): a string, or the dict form."""
    text = HOSTILE[kind]
    if shape == "dict":
        return {"output": f"yes {text}", "model": f"m{text}", "note": text}
    return f"yes {text}"


@pytest.mark.parametrize("kind", ["nul", "surrogate"])
@pytest.mark.parametrize("shape", ["str", "dict"])
def test_a_pipeline_returning_one_gives_a_replaced_ok_trial(
    kind, shape, django_capture_on_commit_callbacks
):
    target = {
        "kind": "callable",
        "path": "tests.flows.test_hostile_text:hostile_pipeline",
        "settings": {"shape": shape, "kind": kind},
    }
    run = one_case_run(django_capture_on_commit_callbacks, target)
    assert run.status == Run.Status.SUCCEEDED
    assert (run.trials_finished, run.trials_errored) == (2, 0)
    trial = Trial.objects.filter(run=run).first()
    assert trial.output == "yes \ufffd"
    # the dict form: output, model, and the three in the kept reply (output, model, note)
    record = {"output": 1} if shape == "str" else {"output": 1, "raw_response": 3, "model": 1}
    assert trial.raw_response[REPLACED_KEY] == record
    stored_text_is_clean(run)


def test_a_clean_pipeline_output_carries_no_replacement_record(django_capture_on_commit_callbacks):
    target = {
        "kind": "callable",
        "path": "tests.flows.test_hostile_text:hostile_pipeline",
        "settings": {"shape": "dict", "kind": "none"},
    }
    run = one_case_run(django_capture_on_commit_callbacks, target)
    trial = Trial.objects.filter(run=run).first()
    assert trial.output == "yes " and REPLACED_KEY not in trial.raw_response


# -- 2. judge replies: replaced with U+FFFD, the grade says so, the judge run finishes ----


def judge_reply(reasoning_json: str, verdict: str = "PASS") -> str:
    """A judge reply (the content) whose reasoning is the JSON string literal given."""
    return '{"reasoning": ' + reasoning_json + ', "verdict": "' + verdict + '"}'


JUDGE_REPLIES = [
    # the reply's own JSON escapes one: the parsed reasoning holds it
    pytest.param(judge_reply('"ok \\u0000"'), {"reply_fields": 1}, id="escaped-nul"),
    pytest.param(judge_reply('"ok \\ud800"'), {"reply_fields": 1}, id="escaped-surrogate"),
    # the reply text itself holds one (the provider's body escapes it)
    pytest.param(judge_reply('"ok \x00"'), {"output": 1, "raw_response": 1}, id="nul"),
    pytest.param(judge_reply('"ok \ud800"'), {"output": 1, "raw_response": 1}, id="surrogate"),
]


@pytest.mark.parametrize(("reply", "record"), JUDGE_REPLIES)
def test_a_judge_run_whose_replies_hold_one_grades_every_trial(
    reply, record, client, carol, django_capture_on_commit_callbacks
):

    with FakeLLM(responder=lambda body: reply) as llm:
        trials = make_trials(["Paris", "Lyon"])
        version = make_version(llm, max_attempts=1)
        with django_capture_on_commit_callbacks(execute=True):
            runs.judge_run_start(run=trials[0].run, judge_version=version)
    judge_run = JudgeRun.objects.get()
    assert (judge_run.status, judge_run.trials_graded, judge_run.trials_errored) == (
        "succeeded",
        2,
        0,
    )
    grades = list(Grade.objects.filter(trial__run=trials[0].run))
    assert [g.passed for g in grades] == [True, True]
    assert {g.details["reasoning"] for g in grades} == {"ok \ufffd"}
    assert all(g.details[REPLACED_KEY] == record for g in grades)
    stored_text_is_clean(trials[0].run)
    assert client.login(username=carol.username, password=PASSWORD)
    page = client.get(reverse("evals:trial-detail", args=[trials[0].uuid])).content.decode()
    assert "reply text replaced with U+FFFD" in page


def test_a_judge_reply_with_a_raw_nul_byte_is_an_errored_grade_and_the_job_ends(
    django_capture_on_commit_callbacks,
):

    body = completion('"{\\"reasoning\\": \\"ok \x00\\", \\"verdict\\": \\"PASS\\"}"')
    with FakeLLM(responder=lambda b: body) as llm:
        trials = make_trials(["Paris"])
        version = make_version(llm, max_attempts=1)
        with django_capture_on_commit_callbacks(execute=True):
            runs.judge_run_start(run=trials[0].run, judge_version=version)
    assert JudgeRun.objects.get().status == "failed"  # its only grade errored
    grade = Grade.objects.get()
    # a 200 body that is not JSON (a raw control character) is an http_error, kept clean
    assert (grade.status, grade.passed, grade.reason) == ("error", None, "http_error")
    assert grade.details[REPLACED_KEY] == {"raw_response": 1}
    stored_text_is_clean(trials[0].run)


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
@pytest.mark.parametrize("escape", ESCAPES)
def test_judge_run_wait_ends_for_a_judge_answering_one(escape, monkeypatch):

    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(
        judge_run_command,
        "time",
        SimpleNamespace(
            monotonic=lambda: clock.now, sleep=lambda s: setattr(clock, "now", clock.now + s)
        ),
    )
    with FakeLLM(responder=lambda body: judge_reply(f'"odd {escape}"', "FAIL")) as llm:
        trials = make_trials(["Paris", "Lyon"])
        make_version(llm, max_attempts=1)
        out = StringIO()
        call_command("judge_run", str(trials[0].run.uuid), "j:v1", "--wait", stdout=out)
    judge_run = JudgeRun.objects.get()
    assert (judge_run.status, judge_run.trials_graded) == ("succeeded", 2)
    assert clock.now < 60  # it did not wait out a timeout
    assert sorted(Grade.objects.values_list("passed", flat=True)) == [False, False]


@pytest.mark.parametrize("escape", ESCAPES)
def test_the_judge_rung_of_a_run_finishes_when_the_judge_answers_one(
    escape, llm, django_capture_on_commit_callbacks
):

    version = make_version(llm, max_attempts=1)
    llm.responder = lambda body: (
        judge_reply(f'"odd {escape}"') if body["model"] == "judge-model" else "yes"
    )
    graders = [
        {"key": "judge", "kind": "judge", "config": {"judge_version": str(version.uuid)}},
    ]
    run = one_case_run(
        django_capture_on_commit_callbacks, llm.target(model="fake-model"), graders=graders
    )
    assert run.status == Run.Status.SUCCEEDED
    assert Grade.objects.filter(trial__run=run, grader="judge", passed=True).count() == 2
    assert all(
        g.details[REPLACED_KEY] == {"reply_fields": 1} for g in Grade.objects.filter(trial__run=run)
    )
    stored_text_is_clean(run)


# -- 3. imported files: refused naming the record and the field; nothing written ---------

PROMPTFOO = PROJECT_DIR / "tests" / "fixtures" / "interop" / "promptfoo" / "results.json"
INSPECT = PROJECT_DIR / "tests" / "fixtures" / "interop" / "inspect" / "log.json"
MARK = "HOSTILE-MARK"  # stands for the hostile text in a document, then replaced in its bytes
# How a document spells each kind: a JSON escape (valid JSON), or raw bytes (refused earlier:
# a raw NUL is not allowed in a JSON string, ED A0 80 is not UTF-8).
SPELLINGS = {
    "escaped-nul": b"\\u0000",
    "escaped-surrogate": b"\\ud800",
    "raw-nul": b"\x00",
    "raw-surrogate": b"\xed\xa0\x80",
}
UNSTORABLE_TEXT = "holds U+0000 (NUL) or an unpaired surrogate"


def spelled(document: bytes, spelling: str) -> bytes:
    assert MARK.encode() in document
    return document.replace(MARK.encode(), SPELLINGS[spelling])


def nothing_imported() -> None:
    assert (Run.objects.count(), Trial.objects.count(), Case.objects.count()) == (0, 0, 0)


def labeled_file() -> bytes:
    rec = record(responses=[{"response_id": "R", "model": None, "text": f"r {MARK}"}])
    return jsonl([record(id="ok-1"), rec])


def promptfoo_file() -> bytes:
    doc = json.loads(PROMPTFOO.read_text())
    doc["results"]["results"][1]["response"]["output"] = f"answer {MARK}"
    return json.dumps(doc).encode()


def inspect_file() -> bytes:
    doc = json.loads(INSPECT.read_text())
    doc["samples"][1]["output"]["completion"] = f"answer {MARK}"
    return json.dumps(doc).encode()


def jsonl_file() -> bytes:
    rows = [{"case_id": "c1", "input": "q", "output": "a"}, {"case_id": "c2", "output": MARK}]
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def csv_file() -> bytes:
    return f"case_id,input,output\nc1,q,a\nc2,q2,b {MARK}\n".encode()


# (format, file builder, the refusal for the escaped spelling: (field, record, detail start))
FILES = {
    "labeled": (
        labeled_file,
        ("responses[0].text", 2, "line 2: field responses[0].text: "),
    ),
    "promptfoo": (
        promptfoo_file,
        ("results.results[1].response.output", None, "results.results[1].response.output: "),
    ),
    "inspect": (
        inspect_file,
        ("samples[1].output.completion", None, "samples[1].output.completion: "),
    ),
    # tabular files name the row in the sentence (``record`` is the ingest API's index)
    "jsonl": (jsonl_file, ("output", None, "line 2: field output: ")),
    "csv": (csv_file, ("output", None, "row 2 (line 3): field output: ")),
}


@pytest.mark.parametrize("spelling", list(SPELLINGS))
@pytest.mark.parametrize("fmt", list(FILES))
def test_an_import_holding_one_is_refused_naming_record_and_field(fmt, spelling):
    build, (field, record_no, detail) = FILES[fmt]
    data = spelled(build(), spelling)
    if fmt == "csv" and spelling.startswith("escaped"):
        # CSV has no escapes: the six characters are text, stored as they are
        summary = import_bytes(data, filename="f.csv", fmt="csv")
        assert summary.trials == 2
        assert Trial.objects.get(case__key="c2").output == "b " + SPELLINGS[spelling].decode()
        return
    with pytest.raises(DomainError) as refused:
        import_bytes(data, filename=f"f.{fmt}", fmt=fmt)
    error = refused.value
    if spelling == "raw-surrogate":
        assert "invalid UTF-8" in str(error)
    elif spelling == "raw-nul" and fmt != "csv":
        assert "invalid JSON" in str(error)
    else:
        assert (error.field, error.record) == (field, record_no)
        assert str(error).startswith(detail + UNSTORABLE_TEXT), str(error)
    nothing_imported()


@pytest.mark.parametrize("spelling", ["escaped-nul", "escaped-surrogate", "raw-nul"])
@pytest.mark.parametrize("fmt", ["labeled", "promptfoo", "inspect"])
def test_the_import_api_answers_400_naming_the_field(carol, fmt, spelling):
    build, (field, record_no, _) = FILES[fmt]
    response = client_for(carol).post(
        "/api/imports",
        {
            "file": SimpleUploadedFile(f"f.{fmt}", spelled(build(), spelling)),
            "format": fmt,
            "suite": "S",
            "run": "R",
        },
        format="multipart",
    )
    assert response.status_code == 400, response.content
    if spelling.startswith("escaped"):
        assert (response.json()["field"], response.json()["record"]) == (field, record_no)
        assert UNSTORABLE_TEXT in response.json()["detail"]
    nothing_imported()


@pytest.mark.parametrize("spelling", ["escaped-nul", "escaped-surrogate"])
@pytest.mark.parametrize("fmt", ["labeled", "promptfoo", "inspect"])
def test_the_upload_page_shows_the_refusal(client, carol, fmt, spelling):
    build, (field, _, _) = FILES[fmt]
    assert client.login(username=carol.username, password=PASSWORD)
    response = client.post(
        "/imports/new/",
        {
            "file": SimpleUploadedFile(f"f.{fmt}", spelled(build(), spelling)),
            "suite": "S",
            "run": "R",
            "format": fmt,
            "suite_kind": "regression",
            "mapping": "",
            "threshold": "",
        },
    )
    assert response.status_code == 400
    assert "Nothing was imported." in response.content.decode()
    assert field in response.content.decode() and UNSTORABLE_TEXT in response.content.decode()
    nothing_imported()


@pytest.mark.parametrize("spelling", ["escaped-nul", "escaped-surrogate", "raw-nul"])
def test_import_results_exits_with_its_error_code_not_a_traceback(tmp_path, spelling):
    path = tmp_path / "records.jsonl"
    path.write_bytes(spelled(labeled_file(), spelling))
    with pytest.raises(CommandError) as refused:
        call_command("import_results", str(path), "--suite", "S", "--run", "R")
    assert refused.value.returncode == 1
    nothing_imported()


# -- 4. run files: import_run, gate --head FILE, POST /api/gate ---------------------------

STEADY = {f"c{i}": "PPPF" for i in range(4)}


@pytest.fixture
def base_and_file(tmp_path):
    """A base run in the database and a run file (of a second run) whose name is MARK."""
    version = judge_version(1)
    base = db_run(STEADY, name="B", version=version)
    head = db_run(STEADY, name="H", version=version)
    document = run_export(run=head)
    document["run"]["name"] = f"H {MARK}"
    head.delete()
    return base, json.dumps(document).encode()


RUN_FILE_REFUSALS = {
    "escaped-nul": UNSTORABLE_TEXT,
    "escaped-surrogate": UNSTORABLE_TEXT,
    "raw-nul": "Invalid control character",
    "raw-surrogate": "invalid continuation byte",
}


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_import_run_refuses_a_file_holding_one_with_an_error_not_a_traceback(
    base_and_file, tmp_path, spelling
):
    _, document = base_and_file
    path = tmp_path / "run.json"
    path.write_bytes(spelled(document, spelling))
    runs_before = Run.objects.count()
    with pytest.raises(CommandError) as refused:
        call_command("import_run", str(path), "--name", "imported")
    assert refused.value.returncode == 1
    assert RUN_FILE_REFUSALS[spelling] in str(refused.value)
    if spelling.startswith("escaped"):
        assert f"{path}: run.name: {UNSTORABLE_TEXT}" in str(refused.value)
    assert Run.objects.count() == runs_before


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_gate_exits_3_for_a_head_file_holding_one_never_1(base_and_file, tmp_path, spelling):
    _, document = base_and_file
    path = tmp_path / "head.json"
    path.write_bytes(spelled(document, spelling))
    with pytest.raises(CommandError) as refused:
        call_command("gate", "--head", str(path), "--base", "S/B")
    assert refused.value.returncode == 3  # bad input; 1 would read as "regression"
    assert RUN_FILE_REFUSALS[spelling] in str(refused.value)
    if spelling.startswith("escaped"):
        assert f"{path}: field run.name: {UNSTORABLE_TEXT}" in str(refused.value)


@pytest.mark.parametrize("spelling", ["escaped-nul", "escaped-surrogate"])
def test_the_gate_api_answers_400_naming_the_place_in_an_embedded_file(
    base_and_file, carol, spelling
):
    base, document = base_and_file
    body = (
        b'{"head_file": '
        + spelled(document, spelling)
        + b', "base": "'
        + str(base.uuid).encode()
        + b'"}'
    )
    response = client_for(carol).post("/api/gate", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "head_file.run.name"
    assert response.json()["detail"] == f"head_file.run.name: {UNSTORABLE}"


def test_the_gate_api_answers_400_for_a_raw_nul_in_an_embedded_file(base_and_file, carol):
    base, document = base_and_file
    body = (
        b'{"head_file": '
        + spelled(document, "raw-nul")
        + b', "base": "'
        + str(base.uuid).encode()
        + b'"}'
    )
    response = client_for(carol).post("/api/gate", body, content_type="application/json")
    assert response.status_code == 400
    assert "Invalid control character" in response.json()["detail"]


def test_reading_an_embedded_file_refuses_one_whoever_calls_it(base_and_file):
    _, document = base_and_file
    data = json.loads(spelled(document, "escaped-surrogate"))
    with pytest.raises(DomainError) as refused:
        run_document_read(data, field="base_file")
    assert refused.value.field == "base_file.run.name"


# -- 5. API bodies and form posts ------------------------------------------------------------


@pytest.mark.parametrize("escape", ESCAPES)
def test_any_json_api_body_holding_one_is_a_400_naming_the_field(bob, escape):
    trial = make_trials(["Paris"])[0]
    body = f'{{"trial": "{trial.uuid}", "verdict": "fail", "critique": "bad {escape}"}}'
    response = client_for(bob).post("/api/labels", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json() == {
        "detail": f"critique: {UNSTORABLE}",
        "field": "critique",
        "record": None,
    }
    assert not trial.labels.exists()


def test_a_button_post_holding_a_nul_is_a_400_naming_the_field(client, carol):
    """A post with no text field to show it on (graduating a case: a chosen suite) keeps
    the middleware's 400."""
    suite = Suite.objects.create(name="cap", kind=Suite.Kind.CAPABILITY)
    case = Case.objects.create(suite=suite, key="c1", input="hi")
    assert client.login(username=carol.username, password=PASSWORD)
    url = reverse("evals:case-graduate", args=[suite.uuid, case.uuid])
    response = client.post(url, {"into_suite": "x\x00"})
    assert response.status_code == 400
    page = response.content.decode()
    message = f"field into_suite: {UNSTORABLE}; nothing was saved."
    assert f'<p id="bad-request-message">{message}</p>' in page
    assert 'id="bad-request-back"' in page
    assert Case.objects.count() == 1


def test_a_form_post_cannot_carry_a_lone_surrogate_it_arrives_as_replacements(client, carol):
    run = db_run(STEADY, name="B")
    assert client.login(username=carol.username, password=PASSWORD)
    # the UTF-8 form of U+D800 is not UTF-8: the form's text reads it as U+FFFD
    response = client.post(
        reverse("evals:baseline-set", args=[run.uuid]),
        "note=why%ED%A0%80",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 302
    note = run.suite.baselines.get().note
    assert "\ufffd" in note and not contains_unstorable(note)


@pytest.mark.parametrize("escape", ESCAPES)
def test_a_json_textarea_escaping_one_is_a_form_error(client, carol, escape):
    assert client.login(username=carol.username, password=PASSWORD)
    response = client.post(
        reverse("judges:version-new"),
        {
            "name": "j",
            "kind": "rubric",
            "base_url": "http://127.0.0.1:9/v1",
            "model": "m",
            "prompt_template": "",
            "params_json": '{"temperature": 0, "note": "x' + escape + '"}',
            "output_schema_json": "",
        },
    )
    assert response.status_code == 200
    assert f"params.note: {UNSTORABLE}" in response.content.decode()


# -- 6. config files: apply_config -------------------------------------------------------------

TOML = b"""
[[judges]]
name = "helpfulness"
kind = "rubric"
model = "m"
base_url = "http://127.0.0.1:9/v1"
[judges.params]
note = "x HOSTILE-MARK"
"""
TOML_SPELLINGS = {  # TOML has no surrogate escape: "\\ud800" is a TOML syntax error
    "escaped-nul": (b"\\u0000", "judges[0].params.note: " + UNSTORABLE_TEXT),
    "escaped-surrogate": (b"\\ud800", "not a Unicode scalar value"),
    "raw-nul": (b"\x00", "Illegal character"),
    "raw-surrogate": (b"\xed\xa0\x80", "invalid continuation byte"),
}


@pytest.mark.parametrize("spelling", list(TOML_SPELLINGS))
def test_apply_config_refuses_a_file_holding_one_and_applies_nothing(tmp_path, spelling):
    spelled_bytes, message = TOML_SPELLINGS[spelling]
    path = tmp_path / "assay.toml"
    path.write_bytes(TOML.replace(MARK.encode(), spelled_bytes))
    with pytest.raises(CommandError) as refused:
        call_command("apply_config", str(path))
    assert refused.value.returncode == 1
    assert message in str(refused.value)
    assert not JudgeVersion.objects.exists()


def test_a_label_critique_posted_with_a_nul_keeps_the_item_and_saves_nothing(client, bob):
    run, version, trials = judged_run(2)
    cset = calibration_set(run, version, trials)
    assert client.login(username=bob.username, password=PASSWORD)
    response = client.post(
        reverse("labeling:label-save", args=[cset.uuid]),
        {
            "trial": str(trials[0].uuid),
            "verdict": "fail",
            "critique": "wrong\x00",
            "expected_version": "0",
        },
    )
    page = response.content.decode()
    assert response.status_code == 400
    assert f"critique: {UNSTORABLE}; nothing was saved" in page
    assert "wrong\ufffd</textarea>" in page and "\x00" not in page
    assert not trials[0].labels.exists()


# -- HTML forms re-render with the refusal on the field (core.forms.StorableForm) --------------


def form_post(client, user, url, data):
    assert client.login(username=user.username, password=PASSWORD)
    response = client.post(url, data)
    return response, response.content.decode()


def test_the_new_run_form_shows_a_nul_in_its_name_on_the_field(client, carol):
    suite = Suite.objects.create(name="S")
    Case.objects.create(suite=suite, key="c1", input="hi")
    data = {
        "suite": str(suite.uuid),
        "name": "nightly\x00",
        "source_version": "",
        "target_kind": "simulated",
        "seed": "7",
        "pass_probability": "0.5",
        "trials_per_case": "1",
        "graders": json.dumps(GRADERS),
        "settings_json": "{}",
    }
    response, page = form_post(client, carol, reverse("evals:run-new"), data)
    assert response.status_code == 200
    assert f"name: {UNSTORABLE}; nothing was saved" in page
    assert 'value="nightly\ufffd"' in page and "\x00" not in page
    assert not Run.objects.exists()


def test_the_import_page_shows_a_nul_in_the_suite_name_on_the_field(client, carol):
    data = {
        "file": SimpleUploadedFile("f.jsonl", b'{"key": "a", "input": "q", "output": "x"}\n'),
        "suite": "imported\x00",
        "run": "R",
        "format": "",
        "suite_kind": "regression",
        "mapping": "",
        "threshold": "",
    }
    response, page = form_post(client, carol, "/imports/new/", data)
    assert response.status_code == 200
    assert f"suite: {UNSTORABLE}; nothing was saved" in page
    assert 'value="imported\ufffd"' in page and "\x00" not in page
    assert not Suite.objects.exists() and not Run.objects.exists()


def test_the_judge_version_form_shows_a_nul_in_its_prompt_on_the_field(client, carol):
    data = {
        "name": "j",
        "kind": "rubric",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "prompt_template": "Grade $output\x00",
        "params_json": "{}",
        "output_schema_json": "",
    }
    response, page = form_post(client, carol, reverse("judges:version-new"), data)
    assert response.status_code == 200
    assert f"prompt_template: {UNSTORABLE}; nothing was saved" in page
    assert "Grade $output\ufffd</textarea>" in page and "\x00" not in page
    assert not JudgeVersion.objects.exists()


def test_the_token_form_shows_a_nul_in_its_name_on_the_field(client, alice, carol):
    data = {"user": carol.username, "name": "ci\x00"}
    response, page = form_post(client, alice, reverse("apitokens:token-list"), data)
    assert response.status_code == 400
    assert f"name: {UNSTORABLE}; nothing was saved" in page
    assert 'value="ci\ufffd"' in page and "\x00" not in page
    assert not carol.api_tokens.exists()


def test_the_calibration_set_form_shows_a_nul_in_its_name_on_the_field(client, alice):
    run, version, _trials = judged_run(2)
    data = {"run": str(run.uuid), "name": "set\x00", "judge_version": str(version.uuid)}
    url = reverse("labeling:set-new")
    response, page = form_post(client, alice, url, {**data, "size": "2", "seed": "1"})
    assert response.status_code == 400
    assert f"name: {UNSTORABLE}; nothing was saved" in page
    assert 'value="set\ufffd"' in page and "\x00" not in page
    assert not CalibrationSet.objects.exists()


def test_the_baseline_note_shows_a_nul_on_the_field(client, carol):
    run = db_run(STEADY, name="B")
    url = reverse("evals:baseline-set", args=[run.uuid])
    response, page = form_post(client, carol, url, {"note": "why\x00not"})
    assert response.status_code == 200
    assert f"note: {UNSTORABLE}; nothing was saved" in page
    assert 'value="why\ufffdnot"' in page and "\x00" not in page
    assert 'id="set-baseline"' in page  # the run page, its baseline form shown again
    assert not run.suite.baselines.exists()


def test_a_nul_in_a_field_name_is_shown_as_a_form_error(client, carol):
    suite = Suite.objects.create(name="S")
    data = {
        "suite": str(suite.uuid),
        "key": "k",
        "input_format": "text",
        "input": "q",
        "expected_format": "text",
        "expected": "",
        "context": "[]",
        "tags": "",
        "goal_state": "",
        "extra\x00": "1",
    }
    response, page = form_post(client, carol, reverse("evals:case-new"), data)
    assert response.status_code == 200
    assert f"extra\ufffd: {UNSTORABLE}; nothing was saved" in page
    assert not suite.cases.exists()


@pytest.mark.parametrize(
    ("url", "name"),
    [("/api/runs/?tag=a%00b", "tag"), ("/api/judge-versions/?judge=j%00", "judge")],
)
def test_a_query_parameter_holding_a_nul_is_a_400_on_every_database(carol, url, name):
    response = client_for(carol).get(url)
    assert response.status_code == 400
    assert response.json() == {"detail": f"{name}: {UNSTORABLE}", "field": name, "record": None}


@pytest.mark.parametrize(
    ("url", "name"), [("/runs/?page=1%00", "page"), ("/adjudication/?suite=%00", "suite")]
)
def test_a_page_query_parameter_holding_a_nul_is_a_400(client, alice, url, name):
    assert client.login(username=alice.username, password=PASSWORD)
    response = client.get(url)
    assert response.status_code == 400
    page = response.content.decode()
    assert f'<p id="bad-request-message">query parameter {name}: {UNSTORABLE}.</p>' in page
    assert 'id="bad-request-back"' not in page


def test_an_outsider_and_an_anonymous_caller_still_get_403_and_401_first(mallory):
    url = "/api/judge-versions/?judge=j%00"
    assert client_for(mallory).get(url).status_code == 403
    assert client_for(None).get(url).status_code == 401
