"""pass@k and pass^k tables on generated edge inputs (cases with errored trials, no graded
trial, one trial, all pass, all fail), through ``pass_k_table`` and the figures that use it:
the run report and the comparison. On one case set pass^k never rises with k and pass@k
never falls; every row counts the same cases; intervals contain their estimate and are
never of zero width. Bounded and derandomized whatever the seed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from evals.comparison.compute import comparison_compute
from evals.report.figures import pass_k_table
from evals.report.selectors import run_report
from tests.comparison_builders import db_run, run_data
from tests.page_text import visible_text

TOL = 1e-12
SUITE_NUMBERS = itertools.count()


@st.composite
def tallies(draw):
    """(passed, graded, k_max): 1–8 cases with 0–6 graded trials each (fewer than the run's
    N when trials errored)."""
    n_cases = draw(st.integers(1, 8))
    graded = draw(st.lists(st.integers(0, 6), min_size=n_cases, max_size=n_cases))
    passed = [draw(st.integers(0, g)) for g in graded]
    k_max = draw(st.integers(1, 6))
    return np.array(passed, dtype=np.int64), np.array(graded, dtype=np.int64), k_max


def check_interval(value, low, high) -> None:
    assert low is not None and high is not None
    assert 0 <= low <= value + TOL and value - TOL <= high <= 1
    assert high > low  # never of zero width


def check_table(rows, n_cases_total: int | None = None) -> None:
    """The invariants of one pass@k / pass^k table (``PassK`` rows, k = 1..k_max)."""
    assert [r.k for r in rows] == list(range(1, len(rows) + 1))
    assert len({(r.n_cases, r.cases_left_out) for r in rows}) == 1  # one case set
    if n_cases_total is not None:
        assert rows[0].n_cases + rows[0].cases_left_out == n_cases_total
    if rows[0].n_cases == 0:
        assert all(r.pass_at_k is None and r.pass_hat_k is None for r in rows)
        return
    for r in rows:
        assert r.pass_hat_k <= r.pass_at_k + TOL
        check_interval(r.pass_at_k, r.pass_at_k_low, r.pass_at_k_high)
        check_interval(r.pass_hat_k, r.pass_hat_k_low, r.pass_hat_k_high)
    for a, b in itertools.pairwise(rows):
        assert b.pass_hat_k <= a.pass_hat_k + TOL
        assert b.pass_at_k >= a.pass_at_k - TOL


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(tallies())
def test_a_pass_k_table_never_rises_with_k_on_one_case_set(tally):
    passed, graded, k_max = tally
    rows = pass_k_table(passed, graded, k_max)
    check_table(rows, n_cases_total=len(graded))
    assert rows[0].n_cases == int((graded >= k_max).sum())


verdicts = st.text(alphabet="PPPFFEX", min_size=1, max_size=4)
case_sets = st.dictionaries(st.sampled_from([f"c{i}" for i in range(5)]), verdicts, min_size=1)


def check_sides(rows, headline) -> None:
    """A comparison's pass^k (or pass@k) deltas: each side defined at every k or at none,
    its interval around it, the delta's interval around the delta (absent only at k = 1
    when it is the headline's "in general" interval and that is undefined: one case)."""
    for side in ("base", "head"):
        values = [getattr(r, side) for r in rows]
        assert all(v is None for v in values) or all(v is not None for v in values)
        for r in rows:
            v = getattr(r, side)
            if v is not None:
                check_interval(v, getattr(r, f"{side}_low"), getattr(r, f"{side}_high"))
    for r in rows:
        if r.delta is not None and r.delta_low is None:
            assert r.k == 1 and r.delta_method == "paired" and headline.clustered.low is None
        elif r.delta is not None:
            assert r.delta_low <= r.delta + TOL and r.delta - TOL <= r.delta_high
            assert r.delta_high > r.delta_low


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(base=case_sets, head=case_sets)
def test_a_comparison_s_pass_k_rows_never_rise_with_k(base, head):
    comparison = comparison_compute(base=run_data(base, name="B"), head=run_data(head, name="H"))
    check_sides(comparison.pass_hat_k, comparison.headline)
    check_sides(comparison.pass_at_k, comparison.headline)
    for side in ("base", "head"):
        hat = [getattr(r, side) for r in comparison.pass_hat_k if getattr(r, side) is not None]
        at = [getattr(r, side) for r in comparison.pass_at_k if getattr(r, side) is not None]
        assert all(b <= a + TOL for a, b in itertools.pairwise(hat))
        assert all(b >= a - TOL for a, b in itertools.pairwise(at))


@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(cases=case_sets)
@pytest.mark.django_db
def test_the_run_report_s_pass_k_tables_never_rise_with_k(cases):
    assume(any(set(v) - {"X"} for v in cases.values()))  # some trial ran
    run = db_run(cases, name="R", suite=f"S{next(SUITE_NUMBERS)}")
    report = run_report(run=run)
    for figures in [report.overall, *report.graders]:
        check_table(figures.pass_k, n_cases_total=len(cases))
    for s in report.slices:
        check_table(s.overall.pass_k)


@pytest.mark.django_db
def test_errored_trials_leave_a_case_out_of_every_k_not_only_the_largest(client, carol, capsys):
    # The reported shape: 4 cases of 3 trials, two with an errored trial.
    run = db_run({"a": "PPF", "b": "PPP", "c": "PXF", "d": "PFE"}, name="R")
    rows = run_report(run=run).overall.pass_k
    assert [(r.n_cases, r.cases_left_out) for r in rows] == [(2, 2)] * 3
    assert rows[1].pass_hat_k >= rows[2].pass_hat_k
    client.force_login(carol)
    page = visible_text(client.get(reverse("evals:run-detail", args=[run.uuid])).content.decode())
    # The page and the terminal say the same 2 cases are left out of every k, and why.
    assert "Cases left out (fewer than 3 graded)" in " ".join(page.split())
    call_command("run_report", str(run.uuid))
    assert "pass@k / pass^k (95% CI) over 2 of 4 cases (2 left out: fewer than 3 graded)" in (
        capsys.readouterr().out
    )
