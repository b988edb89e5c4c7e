"""``manage.py run_report``: the same figures as the page, as text or strict JSON."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from stats.intervals import clopper_pearson_interval
from tests.report_builders import ERR, add_trial, make_run, mixed_run

pytestmark = pytest.mark.django_db


def _run(*args) -> str:
    out = StringIO()
    call_command("run_report", *args, stdout=out)
    return out.getvalue()


def test_it_prints_strict_json_with_the_fault_a1_values():
    run = make_run(cases=[("c1", [])], graders=[{"key": "judge", "kind": "judge"}], n=4)
    for attempt, verdict in enumerate([True, True, ERR, False], start=1):
        add_trial(run, "c1", attempt, grades={"judge": verdict})
    data = json.loads(_run(str(run.uuid), "--json"), parse_constant=pytest.fail)
    judge = data["graders"][0]
    assert (judge["trials_passed"], judge["trials_graded"], judge["grades_errored"]) == (2, 3, 1)
    assert data["overall"]["pass_rate"]["mean"] == 2 / 3
    # One case, 2 of 3: that case's Clopper-Pearson interval (beta quantiles, scipy)
    rate = data["overall"]["pass_rate"]
    assert rate["method"] == "clopper-pearson-one-case"
    assert (rate["ci_low"], rate["ci_high"]) == (
        pytest.approx(0.09429932405024609),
        pytest.approx(0.9915962413403874),
    )
    assert data["trials"]["grade_errors"] == 1
    assert data["banners"] == ["incomplete: 1 grade error"]


def test_it_finds_a_run_by_suite_and_name_and_prints_text():
    mixed_run()
    text = _run("S/R1")
    assert "!! 1 of 6 trials errored" in text
    assert "!! incomplete: 2 grade errors" in text
    assert (
        "overall: 50.0% 95% CI [6.8%, 93.2%] over 2 cases; 2/4 trials, 1 errored dropped"
    ) in text
    assert "a: 75.0%" in text
    assert "cost >= $0.10 (cost unknown for 2 of 6 trials)" in text
    assert "b: 1 of 1 failures: missing keys: ['policy_id']" in text


def test_it_reports_null_total_cost_in_json():
    run = mixed_run()
    data = json.loads(_run(str(run.uuid), "--json"))
    assert data["cost"] == {
        "known_usd": "0.100000000000",
        "unknown": 2,
        "finished": 6,
        "total_usd": None,
        "per_passing_trial_usd": None,
    }
    assert data["overall"]["pass_k"][1] == {
        "k": 2,
        "pass_at_k": 1.0,
        "pass_hat_k": 0.0,
        "n_cases": 2,
        "cases_left_out": 1,
        # Two cases with 2 trials: one block of 2 each; Clopper–Pearson of 0 of 2 blocks
        # (pass^2: none passed both) and of 2 of 2 (pass@2: in both, a trial passed).
        "pass_at_k_low": pytest.approx(clopper_pearson_interval(2, 2)[0]),
        "pass_at_k_high": 1.0,
        "pass_hat_k_low": 0.0,
        "pass_hat_k_high": pytest.approx(clopper_pearson_interval(0, 2)[1]),
    }


@pytest.mark.parametrize("ref", ["S/nope", "nosuch", "00000000-0000-0000-0000-000000000000"])
def test_it_refuses_an_unknown_run(ref):
    mixed_run()
    with pytest.raises(CommandError, match="no run"):
        _run(ref)
