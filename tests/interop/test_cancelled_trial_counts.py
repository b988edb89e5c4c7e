"""One definition of a run's trial counts with cancelled trials (evals.run_status): a
cancelled trial was not run, so "N of M trials errored" takes M = finished (ok + errored)
on every surface, the cancelled are said apart ("K cancelled"), and an import's planned
total is what its source recorded, never cases x the largest attempt."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from evals.models import Run
from evals.report.selectors import run_report
from evals.run_status import run_status_shown, run_trial_count
from tests.import_helpers import import_bytes

pytestmark = pytest.mark.django_db

# m1 attempts 1 and 2 ok, m2 errored, m3 cancelled: 4 records, no token counts.
ROWS = (
    '{"case_id": "m1", "input": "q1", "attempt": 1, "output": "a", "passed": true}\n'
    '{"case_id": "m1", "input": "q1", "attempt": 2, "output": "a", "passed": false}\n'
    '{"case_id": "m2", "input": "q2", "status": "error", "error": "timeout"}\n'
    '{"case_id": "m3", "input": "q3", "status": "cancelled"}\n'
)


def _run() -> Run:
    return import_bytes(ROWS.encode(), filename="r.jsonl", suite="S", run="r", fmt="jsonl").runs[0]


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split()).replace(" ,", ",")


def test_the_counts_of_a_run_with_a_cancelled_trial():
    run = _run()
    count = run_trial_count(run)
    assert (count.finished, count.planned, count.errored, count.cancelled) == (3, 4, 1, 1)
    assert (count.partial, count.text, count.summary) == (
        False,
        "3/4",
        "3 of 4 trials finished, 1 errored, 1 cancelled",
    )
    shown = run_status_shown(run)
    assert shown.problems == ("1 of 3 trials errored", "1 cancelled")
    assert not shown.partial
    assert run.error_message == "1 of 3 trials errored; 1 cancelled"


def test_the_run_page_says_one_figure(client, carol):
    run = _run()
    client.force_login(carol)
    page = _text(client.get(reverse("evals:run-detail", args=[run.uuid])).content.decode())
    assert "1 of 3 trials errored (pipeline errors" in page
    assert "3/4 trials finished, 1 errored, 1 cancelled" in page
    assert "imported 1 of 3 trials errored 1 cancelled" in page  # the badge and its problems
    assert "Trials 4 ok 2 errored (pipeline) 1" in page
    assert "cancelled 1" in page
    assert "1 cancelled, not graded" in page
    for wrong in ("of 4 trials errored", "partial", "3/6", "pending"):
        assert wrong not in page, wrong
    listing = _text(client.get(reverse("evals:run-list")).content.decode())
    assert "3/4 1 errored 1 cancelled" in listing


def test_the_api_report_counts_cancelled_apart_from_pending(client, carol):
    run = _run()
    client.force_login(carol)
    data = client.get(f"/api/runs/{run.uuid}/").json()
    assert (data["trials_total"], data["trials_finished"], data["trials_errored"]) == (4, 3, 1)
    assert data["trials_cancelled"] == 1
    report = data["report"]
    assert report["banners"] == ["1 of 3 trials errored"]
    assert (report["trials"]["pending"], report["trials"]["cancelled"]) == (0, 1)
    for figures in (report["overall"], *report["graders"]):
        assert (figures["pending"], figures["cancelled"]) == (0, 1), figures["key"]
    assert report["status_shown"]["problems"] == ["1 of 3 trials errored", "1 cancelled"]


def test_run_report_text_says_the_same_and_unknown_tokens_are_unknown():
    run = _run()
    out = io.StringIO()
    call_command("run_report", str(run.uuid), stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "S / r (imported · 1 of 3 trials errored · 1 cancelled)"
    assert lines[1] == "!! 1 of 3 trials errored"
    assert lines[2] == (
        "trials: 4 total, 2 ok, 1 errored (pipeline), 0 pending, 1 cancelled; 0 grade errors"
    )
    assert lines[3].startswith("overall: ") and lines[3].endswith(
        "; 1/2 trials; 1 cancelled, not graded"
    )
    (tokens,) = [line for line in lines if line.startswith("tokens:")]
    assert tokens.startswith("tokens: unknown in, unknown out; ")
    assert tokens.endswith("; cost unknown")
    out = io.StringIO()
    call_command("run_report", str(run.uuid), "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert (data["tokens"]["input_unknown"], data["overall"]["pending"]) == (3, 0)


def test_some_unknown_tokens_are_a_lower_bound_in_the_text():
    from evals.management.commands.run_report import _tokens  # noqa: PLC0415

    assert (_tokens(0, 3, 3), _tokens(40, 1, 3), _tokens(40, 0, 3), _tokens(0, 0, 0)) == (
        "unknown",
        ">= 40 (unknown for 1 of 3 trials)",
        "40",
        "0",
    )


def test_a_verdict_without_a_score_is_no_score(client, carol):
    run = _run()
    report = run_report(run=run)
    (grader,) = report.graders
    assert (grader.scored, grader.no_score, grader.not_scored) == (0, 2, 0)
    client.force_login(carol)
    page = _text(client.get(reverse("evals:run-detail", args=[run.uuid])).content.decode())
    assert "no score (0 scored, 2 no score)" in page
    assert "not scored" not in page
