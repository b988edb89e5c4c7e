"""The run report: hand-computed values for errors, overall vs per grader, pass@k, cost."""

from __future__ import annotations

import json
import math
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from scipy import stats as sps
from scipy.stats import beta

from evals.report.selectors import run_report
from tests.report_builders import ERR, add_trial, make_run, mixed_run

pytestmark = pytest.mark.django_db


def test_it_drops_an_unparseable_judge_reply_from_the_pass_rate_fault_a1():
    run = make_run(cases=[("c1", [])], graders=[{"key": "judge", "kind": "judge"}], n=4)
    for attempt, verdict in enumerate([True, True, ERR, False], start=1):
        add_trial(run, "c1", attempt, grades={"judge": verdict})
    report = run_report(run=run)
    judge = report.graders[0]
    assert (judge.trials_passed, judge.trials_graded, judge.grades_errored) == (2, 3, 1)
    assert judge.pass_rate.mean == pytest.approx(2 / 3)
    assert report.overall.pass_rate.mean == pytest.approx(2 / 3)
    assert report.trials.grade_errors == 1
    assert report.incomplete_banner == "incomplete: 1 grade error"
    (case,) = report.cases
    assert (case.passed, case.graded, case.grades_errored) == (2, 3, 1)
    assert report.grade_error_reasons[0].text == "1 of 1 errors: unparseable"


def test_it_treats_a_null_score_as_not_scored_fault_c1():
    run = make_run(
        cases=[(f"c{i}", []) for i in range(1, 6)], graders=[{"key": "score", "kind": "numeric"}]
    )
    for key, score in [("c1", 0.9), ("c2", 0.6), ("c3", None), ("c4", 0.75), ("c5", 1.0)]:
        value = ERR if score is None else (score >= 0.7, score, f"score {score}")
        add_trial(run, key, 1, grades={"score": value})
    figures = run_report(run=run).graders[0]
    assert figures.score_mean == pytest.approx(0.8125)
    assert (figures.scored, figures.not_scored) == (4, 1)
    interval = figures.score_interval  # t with 3 df over the 4 scored cases' means
    assert interval.n_cases == 4 and interval.mean == figures.score_mean
    assert (interval.ci_low, interval.ci_high) == pytest.approx(
        sps.t.interval(0.95, 3, 0.8125, sps.sem([0.9, 0.6, 0.75, 1.0]))
    )
    assert (figures.trials_passed, figures.trials_graded) == (3, 4)
    assert figures.pass_rate.mean == 0.75
    assert figures.trials_failed == 1


def test_it_counts_trials_and_errors_at_the_top():
    report = run_report(run=mixed_run())
    t = report.trials
    assert (t.total, t.ok, t.errored, t.pending, t.cancelled) == (6, 5, 1, 0, 0)
    assert (t.grade_errors, t.judge_errors, t.overall_errored) == (2, 0, 1)
    assert report.errored_banner == "1 of 6 trials errored"
    assert report.incomplete_banner == "incomplete: 2 grade errors"


def test_it_computes_overall_from_gating_graders_and_never_passes_an_errored_grade():
    report = run_report(run=mixed_run())
    o = report.overall
    assert (o.trials_passed, o.trials_graded, o.grades_errored, o.pipeline_errored) == (2, 4, 1, 1)
    assert o.pass_rate.mean == 0.5
    # Two cases at 1/2 each: no spread seen, so the exact interval of 2 of 4 trials
    # (Clopper-Pearson; never the old zero-width [50%, 50%]).
    assert o.pass_rate.se == pytest.approx(0.25)
    assert o.pass_rate.ci_low == pytest.approx(beta.ppf(0.025, 2, 3))
    assert o.pass_rate.ci_high == pytest.approx(beta.ppf(0.975, 3, 2))
    assert (o.pass_rate.n_cases, o.cases_ungraded) == (2, 1)


def test_it_reports_each_grader_separately():
    report = run_report(run=mixed_run())
    a, b, c = report.graders
    assert (a.key, a.gating) == ("a", True)
    assert (a.trials_passed, a.trials_graded, a.grades_errored) == (3, 4, 1)
    assert a.pass_rate.mean == 0.75
    assert a.pass_rate.se == pytest.approx(0.25)
    # Cases at 2/2 and 1/2: the t quantile with 1 df leaves almost nothing known.
    assert a.pass_rate.method == "korn-graubard"
    assert a.pass_rate.ci_low < 1e-6 and a.pass_rate.ci_high > 1 - 1e-6
    assert (b.trials_passed, b.trials_graded, b.grades_errored) == (3, 4, 1)
    assert b.pass_rate.mean == pytest.approx((0.5 + 1 + 1) / 3)
    assert (c.gating, c.trials_passed, c.trials_graded, c.not_graded) == (False, 0, 1, 4)
    assert c.pass_rate.mean == 0.0
    # One case at 0/1: that case's exact interval, never [0%, 0%].
    assert (c.pass_rate.method, c.pass_rate.ci_low) == ("clopper-pearson-one-case", 0.0)
    assert c.pass_rate.ci_high == pytest.approx(0.975)


def test_it_computes_pass_at_k_and_pass_hat_k_leaving_out_short_cases():
    o = run_report(run=mixed_run()).overall
    k1, k2 = o.pass_k
    assert (k1.k, k1.pass_at_k, k1.pass_hat_k, k1.n_cases, k1.cases_left_out) == (1, 0.5, 0.5, 2, 1)
    assert (k2.k, k2.pass_at_k, k2.pass_hat_k, k2.n_cases, k2.cases_left_out) == (2, 1.0, 0.0, 2, 1)


def test_it_lists_cases_worst_first_with_wilson_intervals():
    rows = run_report(run=mixed_run()).cases
    assert [(r.key, r.passed, r.graded, r.pipeline_errored, r.grades_errored) for r in rows] == [
        ("c2", 0, 0, 1, 1),
        ("c1", 1, 2, 0, 0),
        ("c3", 1, 2, 0, 0),
    ]
    assert (rows[0].rate, rows[0].wilson_low, rows[0].wilson_high) == (None, 0.0, 1.0)
    assert rows[1].wilson_low == pytest.approx(0.09453120573423023)
    assert rows[1].wilson_high == pytest.approx(0.9054687942657698)
    assert [(g.key, g.errored) for g in rows[2].graders] == [("a", 0), ("b", 1), ("c", 0)]


def test_it_slices_by_tag():
    slices = {s.tag: s for s in run_report(run=mixed_run()).slices}
    assert sorted(slices) == ["x", "y"]
    x = slices["x"]
    assert x.n_cases == 2
    o = x.overall
    assert (o.trials_passed, o.trials_graded, o.pipeline_errored) == (1, 2, 1)
    assert x.overall.pass_rate.mean == 0.5
    assert x.overall.pass_rate.ci_low == pytest.approx(beta.ppf(0.025, 1, 2))
    assert x.overall.pass_rate.ci_high == pytest.approx(beta.ppf(0.975, 2, 1))
    assert [g.pass_rate.mean for g in slices["y"].graders[:2]] == [0.5, 1.0]


def test_it_groups_failure_reasons_with_counts():
    report = run_report(run=mixed_run())
    assert [g.text for g in report.failure_reasons] == [
        "1 of 1 failures: wrong",
        "1 of 1 failures: missing keys: ['policy_id']",
        "1 of 1 failures: wrong",
    ]
    assert [g.grader for g in report.failure_reasons] == ["a", "b", "c"]
    assert [g.text for g in report.pipeline_error_reasons] == ["1 of 1 errors: HTTP 500: upstream"]


def test_it_groups_nine_of_eleven_failures_by_reason():
    run = make_run(
        cases=[(f"c{i}", []) for i in range(11)], graders=[{"key": "schema", "kind": "json_schema"}]
    )
    for i in range(11):
        reason = "missing keys: ['policy_id']" if i < 9 else "invalid JSON: x"
        add_trial(run, f"c{i}", 1, grades={"schema": (False, 0.0, reason)})
    (top, rest) = run_report(run=run).failure_reasons
    assert top.text == "9 of 11 failures: missing keys: ['policy_id']"
    assert rest.text == "2 of 11 failures: invalid JSON: x"


def test_it_reports_tokens_latency_and_a_null_total_when_some_cost_is_unknown():
    report = run_report(run=mixed_run())
    assert (report.tokens.input, report.tokens.output) == (500, 40)
    assert (report.tokens.input_unknown, report.tokens.output_unknown) == (1, 2)
    assert (report.latency.p50_ms, report.latency.p95_ms) == (300.0, 480.0)
    assert (report.latency.n, report.latency.unknown) == (5, 1)
    cost = report.cost
    assert (cost.known_usd, cost.unknown, cost.finished) == (Decimal("0.10"), 2, 6)
    assert cost.total_usd is None
    assert cost.per_passing_trial_usd is None


def test_it_divides_a_known_total_by_the_passing_trials():
    run = make_run(cases=[("c1", [])], graders=[{"key": "a", "kind": "exact"}], n=3)
    add_trial(run, "c1", 1, grades={"a": True}, cost="0.01")
    add_trial(run, "c1", 2, grades={"a": False}, cost="0.02")
    add_trial(run, "c1", 3, grades={"a": True}, cost="0.0112")
    cost = run_report(run=run).cost
    assert cost.total_usd == Decimal("0.0412")
    assert cost.per_passing_trial_usd == Decimal("0.02060000")


def test_it_leaves_cost_per_pass_null_without_passes_and_rates_undefined_without_grades():
    run = make_run(cases=[("c1", [])], graders=[{"key": "a", "kind": "exact"}])
    add_trial(run, "c1", 1, status="error", cost="0.01", error="timeout")
    report = run_report(run=run)
    assert report.cost.total_usd == Decimal("0.01")
    assert report.cost.per_passing_trial_usd is None
    assert report.overall.pass_rate.mean is None
    assert report.overall.pass_k[0].pass_at_k is None


def test_it_serialises_to_strict_json():
    data = run_report(run=mixed_run()).to_dict()
    text = json.dumps(data, allow_nan=False)
    assert json.loads(text)["cost"]["known_usd"] == "0.100000000000"
    assert data["banners"] == ["1 of 6 trials errored", "incomplete: 2 grade errors"]
    assert data["overall"]["pass_rate"]["mean"] == 0.5
    assert not any(isinstance(v, float) and not math.isfinite(v) for v in _leaves(data))


def _leaves(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def _queries(run) -> int:
    with CaptureQueriesContext(connection) as ctx:
        run_report(run=run)
    return len(ctx.captured_queries)


def test_it_uses_the_same_number_of_queries_whatever_the_run_size():
    small = make_run(
        cases=[("s1", ["t"])],
        graders=[{"key": "a", "kind": "exact"}],
        name="small",
        suite="S-small",
    )
    add_trial(small, "s1", 1, grades={"a": True})
    big = make_run(
        cases=[(f"b{i}", ["t", f"u{i}"]) for i in range(30)],
        n=3,
        name="big",
        graders=[{"key": "a", "kind": "exact"}, {"key": "b", "kind": "exact"}],
    )
    for i in range(30):
        for attempt in (1, 2, 3):
            add_trial(big, f"b{i}", attempt, grades={"a": attempt != 2, "b": ERR})
    small = type(small).objects.get(pk=small.pk)
    big = type(big).objects.get(pk=big.pk)
    # 8 + the judge calls + retried trials + the cost classes (evals.report.costs)
    assert _queries(small) == _queries(big) == 11


def test_it_never_loads_output_text():
    run = mixed_run()
    with CaptureQueriesContext(connection) as ctx:
        run_report(run=run)
    assert not any(
        '"output"' in q["sql"] and "SELECT" in q["sql"].split("FROM")[0]
        for q in ctx.captured_queries
    )
