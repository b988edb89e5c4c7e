"""promptfoo results files (tests/fixtures/interop/promptfoo, made by the real promptfoo
0.121.20 against the mock LLM): the run report's pass rate is the one promptfoo printed."""

from __future__ import annotations

import io
import json
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from core.errors import DomainError
from evals.models import Case, Grade, Run, Suite, Trial
from evals.report.selectors import run_report
from interop.importers import format_detect, results_import
from tests.conftest import PROJECT_DIR

pytestmark = pytest.mark.django_db
FIXTURES = PROJECT_DIR / "tests" / "fixtures" / "interop" / "promptfoo"
RESULTS = FIXTURES / "results.json"
RESULTS_ERRORS = FIXTURES / "results-errors.json"


def _import(data: bytes, *, name: str = "results.json", fmt: str | None = "promptfoo"):
    return results_import(
        stream=io.BytesIO(data), filename=name, suite_name="pf", run_name="r1", fmt=fmt
    )


def _doc() -> dict:
    return json.loads(RESULTS.read_bytes())


def _bytes(doc: dict) -> bytes:
    return json.dumps(doc).encode()  # allow_nan: NaN/Infinity stay bare tokens


def _report(summary) -> dict:
    return run_report(run=summary.runs[0]).to_dict()


def test_the_pass_rate_equals_the_one_promptfoo_printed():
    # promptfoo printed: "7 passed (38.89%)", "11 failed (61.11%)", "0 errors (0%)".
    summary = _import(RESULTS.read_bytes())
    overall = _report(summary)["overall"]
    assert (overall["trials_passed"], overall["trials_graded"]) == (7, 18)
    assert overall["pipeline_errored"] == 0 and overall["grades_errored"] == 0
    assert overall["pass_rate"]["mean"] == pytest.approx(7 / 18)
    assert round(100 * overall["pass_rate"]["mean"], 2) == 38.89
    stats = _doc()["results"]["stats"]
    assert (stats["successes"], stats["failures"], stats["errors"]) == (7, 11, 0)


def test_each_row_is_a_trial_with_its_case_attempt_tokens_and_latency():
    summary = _import(RESULTS.read_bytes())
    run = summary.runs[0]
    assert (summary.cases, summary.trials) == (6, 18)
    assert run.source == Run.Source.IMPORTED and run.model == "openai:chat:mock-model"
    assert run.trials_per_case == 3 and run.target["promptfoo"]["printed"] == {
        "successes": 7,
        "failures": 11,
        "errors": 0,
    }
    case = Case.objects.get(key="c00003")
    assert case.input == {"case_id": "c00003", "p": "0.70", "expect": "ANSWER-c00003"}
    trials = list(Trial.objects.filter(run=run, case=case).order_by("attempt"))
    assert [t.attempt for t in trials] == [1, 2, 3]
    assert [t.output for t in trials] == ["WRONG-c00003-0", "WRONG-c00003-1", "ANSWER-c00003"]
    assert (trials[2].input_tokens, trials[2].output_tokens) == (24, 4)
    row = next(r for r in _doc()["results"]["results"] if r["testIdx"] == 8)
    assert trials[2].latency_ms == float(row["latencyMs"])
    report = _report(summary)
    assert (report["tokens"]["input"], report["tokens"]["output"]) == (432, 72)


def test_a_zero_cost_is_unknown_and_a_positive_cost_is_kept():
    doc = _doc()
    doc["results"]["results"][0]["cost"] = 0.00042
    summary = _import(_bytes(doc))
    costs = list(Trial.objects.filter(run=summary.runs[0]).values_list("cost_usd", flat=True))
    assert costs.count(None) == 17  # promptfoo wrote 0 for every row: no price known
    assert Decimal("0.00042") in costs


def test_each_assertion_is_a_non_gating_grade_beside_promptfoos_verdict():
    summary = _import(RESULTS.read_bytes())
    run = summary.runs[0]
    assert [(g["key"], g["gating"]) for g in run.graders] == [
        ("promptfoo", True),
        ("equals", False),
        ("contains", False),
    ]
    trial = Trial.objects.get(run=run, case__key="c00002", attempt=2)
    grades = {g.grader: g for g in trial.grades.all()}
    assert grades["promptfoo"].passed is False and grades["promptfoo"].gating
    assert grades["equals"].passed is False and not grades["equals"].gating
    assert grades["equals"].reason.startswith("Expected output")
    assert grades["contains"].details["assertion"] == {"type": "contains", "value": "{{expect}}"}
    assert Grade.objects.filter(trial__run=run).count() == 18 * 3


def test_a_provider_error_is_an_errored_trial_never_a_fail():
    # promptfoo printed: "2 passed (33.33%)", "2 failed (33.33%)", "2 errors (33.33%)".
    summary = _import(RESULTS_ERRORS.read_bytes(), name="results-errors.json")
    run = summary.runs[0]
    errored = Trial.objects.filter(run=run, status=Trial.Status.ERROR)
    assert errored.count() == 2 == run.trials_errored
    assert all(t.error_message.startswith("API error: 500") for t in errored)
    assert not Grade.objects.filter(trial__in=errored).exists()
    overall = _report(summary)["overall"]
    assert (overall["trials_passed"], overall["trials_graded"]) == (2, 4)
    assert overall["pipeline_errored"] == 2
    # promptfoo divides by all 6 rows (33.33%); Assay leaves the 2 errors out and says so:
    # per case c00001 1/1 and c00002 1/3, mean 2/3.
    assert overall["pass_rate"]["mean"] == pytest.approx(2 / 3)
    assert "2 of 6 trials errored" in _report(summary)["banners"]


def test_a_provider_error_without_a_failure_reason_is_still_an_errored_trial():
    doc = json.loads(RESULTS_ERRORS.read_bytes())
    for row in doc["results"]["results"]:
        row.pop("failureReason")
    summary = _import(_bytes(doc))
    assert Trial.objects.filter(run=summary.runs[0], status=Trial.Status.ERROR).count() == 2
    assert not Grade.objects.filter(trial__status=Trial.Status.ERROR).exists()


def test_an_assertion_that_threw_is_an_errored_grade_not_a_fail():
    doc = _doc()
    row = doc["results"]["results"][4]
    row.update(failureReason=2, error="TypeError: assertion threw", success=False)
    summary = _import(_bytes(doc))
    trial = Trial.objects.get(run=summary.runs[0], case__key="c00002", attempt=2)
    assert trial.status == Trial.Status.OK and trial.output == row["response"]["output"]
    grade = trial.grades.get(grader="promptfoo")
    assert (grade.status, grade.passed, grade.reason) == (
        "error",
        None,
        "TypeError: assertion threw",
    )
    assert _report(summary)["overall"]["grades_errored"] == 1


def test_it_detects_a_promptfoo_file_pretty_printed_or_on_one_line():
    assert format_detect(stream=io.BytesIO(RESULTS.read_bytes()), filename="x.json") == (
        "promptfoo"
    )
    assert format_detect(stream=io.BytesIO(_bytes(_doc())), filename="x.json") == "promptfoo"
    summary = _import(RESULTS.read_bytes(), fmt=None)
    assert summary.format == "promptfoo" and summary.trials == 18


def test_the_case_key_is_a_hash_of_vars_without_a_description():
    doc = _doc()
    for row in doc["results"]["results"]:
        row["testCase"].pop("description")
    _import(_bytes(doc))
    keys = set(Case.objects.values_list("key", flat=True))
    assert len(keys) == 6 and all(k.startswith("vars-") and len(k) == 21 for k in keys)


def _refused(doc_or_bytes, match: str) -> None:
    data = doc_or_bytes if isinstance(doc_or_bytes, bytes) else _bytes(doc_or_bytes)
    with pytest.raises(DomainError, match=match):
        _import(data)
    assert Run.objects.count() == Trial.objects.count() == Case.objects.count() == 0
    assert Suite.objects.count() == 0


def test_it_refuses_the_wrong_shape_and_writes_nothing():
    _refused({"evalId": "x", "results": []}, r"^results: not a promptfoo results file")
    _refused(b'{"results": {"version": 3, "results": []}}', "the file holds no results")
    _refused(b"[1, 2", r"line 1 column 6: invalid JSON")
    _refused(b'{"results": {"version": 3, "version": 3}}', "key 'version' appears twice")
    _refused(b'{"evalId": "\xff"}', r"byte offset 12: invalid UTF-8")
    assert not Run.objects.exists() and not Trial.objects.exists()  # all refused


def test_it_names_the_row_and_field_of_a_missing_or_mistyped_value():
    doc = _doc()
    del doc["results"]["results"][3]["success"]
    _refused(doc, r"results\.results\[3\]\.success: missing")
    doc = _doc()
    doc["results"]["results"][5]["success"] = "false"
    _refused(doc, r"results\.results\[5\]\.success: expected true or false, got 'false'")
    doc = _doc()
    doc["results"]["results"][2]["gradingResult"]["componentResults"][1]["pass"] = 1
    _refused(doc, r"results\.results\[2\]\.gradingResult\.componentResults\[1\]\.pass")


def test_it_refuses_a_non_finite_latency_and_treats_a_nan_score_as_not_scored():
    doc = _doc()
    doc["results"]["results"][0]["latencyMs"] = float("nan")
    _refused(doc, r"results\.results\[0\]\.latencyMs: expected a finite number")
    doc = _doc()
    doc["results"]["results"][0]["response"]["tokenUsage"]["prompt"] = float("inf")
    _refused(doc, r"results\.results\[0\]\.response\.tokenUsage\.prompt")
    doc = _doc()
    doc["results"]["results"][0]["score"] = float("nan")
    summary = _import(_bytes(doc))
    grade = Grade.objects.get(
        trial__run=summary.runs[0], trial__case__key="c00001", trial__attempt=1, grader="promptfoo"
    )
    assert grade.passed is True and grade.score is None


def test_it_refuses_a_second_provider_and_a_case_key_with_two_contents():
    doc = _doc()
    doc["results"]["results"][7]["provider"]["id"] = "openai:chat:other"
    _refused(doc, r"results\.results\[7\]\.provider: a second provider or prompt")
    doc = _doc()
    doc["results"]["results"][4]["testCase"]["vars"]["p"] = "0.99"
    _refused(doc, r"results\.results\[4\]: case 'c00002' has different content")
    assert not Run.objects.exists() and not Trial.objects.exists()  # all refused


def test_the_command_imports_with_format_promptfoo(capsys):
    call_command(
        "import_results",
        str(RESULTS),
        "--suite",
        "pf",
        "--run",
        "cli",
        "--format",
        "promptfoo",
        "--json",
    )
    out = json.loads(capsys.readouterr().out)
    assert (out["format"], out["trials"], out["cases"]) == ("promptfoo", 18, 6)
    with pytest.raises(CommandError, match="mapping: a promptfoo file takes no column"):
        call_command(
            "import_results",
            str(RESULTS),
            "--suite",
            "pf",
            "--run",
            "cli2",
            "--format",
            "promptfoo",
            "--map",
            "case_id=x",
        )


def test_a_provider_error_on_a_row_promptfoo_called_a_success_is_still_an_errored_trial():
    doc = _doc()
    row = doc["results"]["results"][0]
    assert row["success"] is True
    row["response"]["error"] = "API error: 503"
    summary = _import(_bytes(doc))
    trial = Trial.objects.get(run=summary.runs[0], case__key="c00001", attempt=1)
    assert (trial.status, trial.error_message, trial.output) == ("error", "API error: 503", "")
    assert not trial.grades.exists()  # never a pass
