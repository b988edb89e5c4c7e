"""Inspect AI JSON logs (tests/fixtures/interop/inspect, made by the real inspect-ai 0.3.285
against the mock LLM): the run report's pass rate is the accuracy Inspect printed."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from django.core.management import call_command

from core.errors import DomainError
from evals.models import Case, Grade, Run, Suite, Trial
from evals.report.selectors import run_report
from interop.importers import format_detect, results_import
from interop.importers.inspect_log import value_to_float
from tests.conftest import PROJECT_DIR

pytestmark = pytest.mark.django_db
FIXTURES = PROJECT_DIR / "tests" / "fixtures" / "interop" / "inspect"
LOG = FIXTURES / "log.json"
LOG_ERRORS = FIXTURES / "log-errors.json"


def _import(data: bytes, *, name: str = "log.json", fmt: str | None = "inspect"):
    return results_import(
        stream=io.BytesIO(data), filename=name, suite_name="ins", run_name="r1", fmt=fmt
    )


def _doc(path: Path = LOG) -> dict:
    return json.loads(path.read_bytes())


def _bytes(doc: dict) -> bytes:
    return json.dumps(doc).encode()  # allow_nan: NaN/Infinity stay bare tokens


def _overall(summary) -> dict:
    return run_report(run=summary.runs[0]).to_dict()["overall"]


def test_the_pass_rate_equals_the_accuracy_inspect_printed():
    # Inspect printed "accuracy  0.389" (match scorer, 6 samples x 3 epochs).
    summary = _import(LOG.read_bytes())
    overall = _overall(summary)
    assert (overall["trials_passed"], overall["trials_graded"]) == (7, 18)
    assert overall["pass_rate"]["mean"] == pytest.approx(7 / 18)
    assert round(overall["pass_rate"]["mean"], 3) == 0.389
    logged = _doc()["results"]["scores"][0]["metrics"]["accuracy"]["value"]
    assert overall["pass_rate"]["mean"] == pytest.approx(logged)
    match = run_report(run=summary.runs[0]).to_dict()["graders"][0]
    assert match["key"] == "match" and match["score_mean"] == pytest.approx(logged)


def test_each_sample_and_epoch_is_a_trial():
    summary = _import(LOG.read_bytes())
    run = summary.runs[0]
    assert (summary.cases, summary.trials, summary.grades) == (6, 18, 18)
    assert run.model == "openai/mock-model" and run.trials_per_case == 3
    assert run.graders == [{"key": "match", "kind": "imported", "gating": True}]
    case = Case.objects.get(key="c00001")
    assert case.expected == "ANSWER-c00001" and case.input.startswith("Reply with")
    trial = Trial.objects.get(run=run, case=case, attempt=2)
    assert trial.output == "ANSWER-c00001"
    assert (trial.input_tokens, trial.output_tokens, trial.cost_usd) == (24, 4, None)
    assert trial.latency_ms > 0
    grade = trial.grades.get()
    assert (grade.grader, grade.passed, grade.score) == ("match", True, 1.0)


def test_a_sample_error_is_an_errored_trial_never_a_fail():
    # Inspect printed "accuracy  0.667" and "2 of 6 executed samples (33%) had errors".
    summary = _import(LOG_ERRORS.read_bytes(), name="log-errors.json")
    run = summary.runs[0]
    errored = Trial.objects.filter(run=run, status=Trial.Status.ERROR)
    assert errored.count() == 2 == run.trials_errored
    assert all("InternalServerError" in t.error_message for t in errored)
    assert not Grade.objects.filter(trial__in=errored).exists()
    overall = _overall(summary)
    assert (overall["trials_passed"], overall["trials_graded"]) == (2, 4)
    assert overall["pipeline_errored"] == 2
    assert round(overall["pass_rate"]["mean"], 3) == 0.667


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("C", 1.0),
        ("I", 0.0),
        ("P", 0.5),
        ("N", 0.0),
        (True, 1.0),
        (False, 0.0),
        (1, 1.0),
        (0.25, 0.25),
        ("yes", 1.0),
        ("FALSE", 0.0),
        ("0.75", 0.75),
        ("maybe", None),
        (None, None),
        ([1, 0], None),
        ("nan", None),
    ],
)
def test_values_follow_inspects_value_to_float_convention(value, expected):
    assert value_to_float(value) == expected


def _with_scores(values: list) -> dict:
    doc = _doc()
    for sample, value in zip(doc["samples"], values, strict=False):
        sample["scores"]["match"]["value"] = value
    return doc


def test_partial_credit_is_a_score_and_an_uncomputable_value_an_errored_grade():
    doc = _with_scores(["P", "N", None, "maybe", float("nan"), {"a": "C", "b": 0.5}])
    summary = _import(_bytes(doc))
    grades = {
        (g.trial.case.key, g.grader): g
        for g in Grade.objects.filter(trial__run=summary.runs[0], trial__attempt=1).select_related(
            "trial__case"
        )
    }
    partial = grades[("c00001", "match")]
    assert (partial.passed, partial.score, partial.status) == (False, 0.5, "ok")
    assert grades[("c00002", "match")].passed is False
    for key, reason in (
        ("c00003", "not scored"),
        ("c00005", "not scored"),
        ("c00004", "could not compute a score from value 'maybe'"),
    ):
        grade = grades[(key, "match")]
        assert (grade.status, grade.passed, grade.score, grade.reason) == (
            "error",
            None,
            None,
            reason,
        )
    assert grades[("c00006", "match/a")].passed is True
    assert grades[("c00006", "match/b")].score == 0.5


def test_it_detects_an_inspect_log():
    assert format_detect(stream=io.BytesIO(LOG.read_bytes()), filename="x.json") == "inspect"
    assert _import(LOG.read_bytes(), fmt=None).format == "inspect"


def _refused(doc_or_bytes, match: str, name: str = "log.json") -> None:
    data = doc_or_bytes if isinstance(doc_or_bytes, bytes) else _bytes(doc_or_bytes)
    with pytest.raises(DomainError, match=match):
        _import(data, name=name)
    assert Run.objects.count() == Trial.objects.count() == Suite.objects.count() == 0


def test_it_refuses_a_binary_eval_log_with_the_command_that_converts_it():
    _refused(b"PK\x03\x04rest-of-zip", r"inspect log convert", name="x.eval")
    assert format_detect(stream=io.BytesIO(b"PK\x03\x04..."), filename="x.eval") == "inspect"


def test_it_refuses_the_wrong_shape_a_running_log_and_a_log_without_samples():
    _refused({"version": 2, "samples": []}, r"^eval: not an Inspect AI JSON log")
    doc = _doc()
    doc["status"] = "started"
    _refused(doc, r"^status: the eval is still running")
    doc = _doc()
    del doc["samples"]
    _refused(doc, r"^samples: the log holds no samples")
    assert not Run.objects.exists() and not Trial.objects.exists()  # all refused


def test_it_names_the_sample_and_field_of_a_missing_or_non_finite_value():
    doc = _doc()
    del doc["samples"][4]["epoch"]
    _refused(doc, r"samples\[4\]\.epoch: missing")
    doc = _doc()
    doc["samples"][2]["epoch"] = "2"
    _refused(doc, r"samples\[2\]\.epoch: expected an integer >= 1, got '2'")
    doc = _doc()
    doc["samples"][1]["total_time"] = math.inf
    _refused(doc, r"samples\[1\]\.total_time: expected a finite number")
    doc = _doc()
    doc["samples"][0]["model_usage"]["openai/mock-model"]["input_tokens"] = -1
    _refused(doc, r"samples\[0\]\.model_usage\.openai/mock-model\.input_tokens")


def test_the_command_imports_with_format_inspect(capsys):
    call_command(
        "import_results",
        str(LOG),
        "--suite",
        "ins",
        "--run",
        "cli",
        "--format",
        "inspect",
        "--json",
    )
    out = json.loads(capsys.readouterr().out)
    assert (out["format"], out["trials"], out["cases"]) == ("inspect", 18, 6)


def test_only_the_headline_scorer_gates():
    doc = _doc()
    for sample in doc["samples"]:
        if sample.get("scores"):
            sample["scores"]["polite"] = {"value": 0, "explanation": "curt"}
    summary = _import(_bytes(doc))
    assert [(g["key"], g["gating"]) for g in summary.runs[0].graders] == [
        ("match", True),
        ("polite", False),
    ]
    assert round(_overall(summary)["pass_rate"]["mean"], 3) == 0.389


def test_a_sample_error_beside_a_correct_score_is_still_an_errored_trial():
    doc = _doc()
    sample = doc["samples"][0]
    assert sample["scores"]["match"]["value"] == "C"  # Inspect's "correct"
    sample["error"] = {"message": "RuntimeError: tool crashed", "traceback": ""}
    summary = _import(_bytes(doc))
    trial = Trial.objects.get(run=summary.runs[0], case__key="c00001", attempt=1)
    assert (trial.status, trial.error_message) == ("error", "RuntimeError: tool crashed")
    assert not trial.grades.exists()  # never a pass
    assert summary.runs[0].trials_errored == 1
