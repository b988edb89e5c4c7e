"""Coverage of the pass-rate intervals, a fast version of ``bench/bench_intervals.py``: a few
cells of its grid, a few hundred seeded simulations each. Fails when a coverage is clearly
off (below 90%; the bench holds every cell to 95% − 2 SE) or an interval has zero width.

Estimand everywhere: the mean of the cases' own true rates (or of their differences), the
cases fixed and only the trials random.
"""

from __future__ import annotations

import numpy as np
import pytest

from stats.compare import within_case_interval_from_counts
from stats.correction import corrected_rate_interval
from stats.intervals import clustered_mean_of_rates, clustered_rate_interval

SIMS = 400
FLOOR = 0.90


def _rates(profile: str, n_cases: int, rng: np.random.Generator) -> np.ndarray:
    if profile == "U":
        return rng.uniform(0.2, 1.0, n_cases)
    return np.full(n_cases, float(profile))


def _coverage(intervals, truth: float) -> tuple[float, int]:
    """Share of (low, high) holding ``truth``, and how many had zero width (or none)."""
    hits = sum(lo is not None and lo - 1e-12 <= truth <= hi + 1e-12 for lo, hi in intervals)
    flat = sum(lo is None or not hi > lo for lo, hi in intervals)
    return hits / len(intervals), flat


@pytest.mark.parametrize(
    "n_cases, trials, profile",
    [
        (3, 5, "0.2"),  # the example: three cases at 1/5 each
        (3, 1, "0.5"),
        (5, 10, "0.02"),
        (12, 1, "0.98"),
        (12, 5, "U"),
        (30, 3, "1.0"),
        (30, 10, "0.9"),
    ],
)
def test_the_run_interval_covers_the_suites_mean_case_rate(n_cases, trials, profile):
    rng = np.random.default_rng([11, n_cases, trials])
    p = _rates(profile, n_cases, rng)
    graded = np.full(n_cases, trials)
    intervals = []
    for _ in range(SIMS):
        r = clustered_rate_interval(rng.binomial(trials, p), graded)
        intervals.append((r.ci_low, r.ci_high))
    coverage, flat = _coverage(intervals, float(p.mean()))
    assert flat == 0
    assert coverage >= FLOOR


def test_the_check_catches_the_old_zero_width_interval():
    """The plain clustered normal interval (what the report showed before) fails the same
    check at three cases × 5 trials, all at 0.2: the check can fail."""
    rng = np.random.default_rng([11, 3, 5])
    intervals = []
    for _ in range(SIMS):
        r = clustered_mean_of_rates(rng.binomial(5, np.full(3, 0.2)) / 5)
        intervals.append((r.ci_low, r.ci_high))
    coverage, flat = _coverage(intervals, 0.2)
    assert flat > 0 and coverage < FLOOR


@pytest.mark.parametrize(
    "n_cases, trials, profile, calibration",
    [
        (3, 5, "0.9", (20, 10)),
        (5, 1, "0.5", (20, 10)),
        (12, 5, "0.98", (70, 30)),
        (30, 3, "0.02", (70, 30)),
        (12, 10, "U", (20, 10)),
    ],
)
def test_the_corrected_interval_covers_the_true_mean_case_rate(
    n_cases, trials, profile, calibration
):
    """A judge with TPR 0.90 and TNR 0.85 grades every trial; its calibration counts are
    drawn afresh each time from ``calibration`` = (human passes, human fails) labels."""
    tpr, tnr = 0.90, 0.85
    rng = np.random.default_rng([12, n_cases, trials])
    p = _rates(profile, n_cases, rng)
    graded = np.full(n_cases, trials)
    n_pass, n_fail = calibration
    intervals = []
    for _ in range(SIMS // 2):
        judged = rng.binomial(trials, tpr * p + (1 - tnr) * (1 - p))
        tp, tn = int(rng.binomial(n_pass, tpr)), int(rng.binomial(n_fail, tnr))
        c = corrected_rate_interval(judged, graded, tp=tp, fn=n_pass - tp, tn=tn, fp=n_fail - tn)
        intervals.append((c.ci_low, c.ci_high))
    coverage, flat = _coverage(intervals, float(p.mean()))
    assert flat == 0
    assert coverage >= FLOOR


@pytest.mark.parametrize(
    "n_cases, trials, base, head",
    [
        (12, 5, "1.0", "0.0"),  # every case 5/5 -> 0/5: once shown as [-100, -100] points
        (30, 3, "0.5", "0.5"),
        (5, 5, "0.9", "0.9"),
        (12, 1, "0.98", "0.02"),
        (3, 10, "U", "U"),
    ],
)
def test_the_within_case_comparison_interval_covers_the_mean_difference(
    n_cases, trials, base, head
):
    rng = np.random.default_rng([13, n_cases, trials])
    p_b = _rates(base, n_cases, rng)
    p_h = p_b.copy() if head == "U" else _rates(head, n_cases, rng)
    graded = np.full(n_cases, trials)
    intervals = [
        within_case_interval_from_counts(
            graded, rng.binomial(trials, p_b), graded, rng.binomial(trials, p_h)
        )
        for _ in range(SIMS)
    ]
    coverage, flat = _coverage(intervals, float((p_h - p_b).mean()))
    assert flat == 0
    assert coverage >= FLOOR
