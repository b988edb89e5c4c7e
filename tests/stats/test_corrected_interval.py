"""corrected_rate_interval: formula by hand, undefined cases, properties (never narrower than
the raw interval / J, symmetric under pass/fail swap), a fast coverage check."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from statsmodels.stats.proportion import proportion_confint

from stats.correction import corrected_pass_rate, corrected_rate_interval
from stats.intervals import clustered_rate_interval

FAST = settings(
    max_examples=100, deadline=200, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


def rg(q, tpr, tnr):
    return (q + tnr - 1) / (tpr + tnr - 1)


def test_it_applies_rogan_gladen_to_the_mean_of_per_case_rates():
    passed, graded = [4, 4, 5, 3, 4], [5, 5, 5, 5, 5]
    r = corrected_rate_interval(passed, graded, tp=40, fn=4, tn=20, fp=3)
    assert (r.tpr, r.tnr) == pytest.approx((40 / 44, 20 / 23))
    assert r.estimate == pytest.approx(rg(0.8, 40 / 44, 20 / 23))
    assert r.method == "rogan-gladen-mover" and r.reason == "" and not r.clipped
    assert r.raw == clustered_rate_interval(passed, graded)


def test_it_combines_the_three_limits_by_mover_by_hand():
    passed, graded = [3, 3, 4, 2, 3, 3, 4, 2], [5] * 8
    tp, fn, tn, fp = 40, 4, 20, 3
    r = corrected_rate_interval(passed, graded, tp=tp, fn=fn, tn=tn, fp=fp)
    raw = clustered_rate_interval(passed, graded)
    q = 0.6
    tpr, tnr = tp / (tp + fn), tn / (tn + fp)
    j, theta = tpr + tnr - 1, rg(q, tpr, tnr)
    a_lo, a_hi = proportion_confint(tp, tp + fn, method="wilson")
    b_lo, b_hi = proportion_confint(tn, tn + fp, method="wilson")
    # θ falls with tpr and rises with tnr (0 < θ < 1).
    down = [(q - raw.ci_low) / j, theta - rg(q, a_hi, tnr), theta - rg(q, tpr, b_lo)]
    up = [(raw.ci_high - q) / j, rg(q, a_lo, tnr) - theta, rg(q, tpr, b_hi) - theta]
    low = theta - math.sqrt(sum(d * d for d in down))
    high = theta + math.sqrt(sum(u * u for u in up))
    assert 0 < low < high < 1  # nothing clipped: the plain MOVER limits
    assert (r.ci_low, r.ci_high) == pytest.approx((low, high))


def test_clipped_at_one_it_is_widened_to_the_raw_width_over_j():
    passed, graded = [4, 4, 5, 3, 4], [5, 5, 5, 5, 5]
    r = corrected_rate_interval(passed, graded, tp=40, fn=4, tn=20, fp=3)
    j = r.tpr + r.tnr - 1
    assert r.ci_high == 1.0
    assert r.ci_low == pytest.approx(1.0 - (r.raw.ci_high - r.raw.ci_low) / j)


def test_it_is_wider_than_the_old_pooled_interval_when_cases_differ():
    # Cases that differ: the pooled binomial delta method claimed too much.
    passed, graded = [5, 5, 0, 5, 1, 5], [5] * 6
    new = corrected_rate_interval(passed, graded, tp=90, fn=10, tn=90, fp=10)
    old = corrected_pass_rate(21 / 30, 0.9, 0.9, n_observed=30, n_pass=100, n_fail=100)
    assert new.ci_high - new.ci_low > 1.5 * (old.ci_high - old.ci_low)


def test_a_perfect_calibration_still_leaves_calibration_uncertainty():
    # 24/24 and 6/6 correct is not certainty that TPR = TNR = 1.
    r = corrected_rate_interval([3, 4, 2, 5], [5] * 4, tp=24, fn=0, tn=6, fp=0)
    raw = r.raw
    assert r.estimate == pytest.approx(raw.mean)
    assert r.ci_low <= raw.ci_low and r.ci_high > raw.ci_high + 0.01


def test_an_observed_rate_below_the_false_accept_rate_keeps_the_raw_width():
    # No judge passes at all while the judge false-accepts ~13% of fails: clipped at 0,
    # widened to the raw width / J rather than shown as [0%, 0%].
    r = corrected_rate_interval([0] * 30, [8] * 30, tp=40, fn=4, tn=20, fp=3)
    j = r.tpr + r.tnr - 1
    assert (r.estimate, r.clipped, r.ci_low) == (0.0, True, 0.0)
    assert r.ci_high == pytest.approx((r.raw.ci_high - r.raw.ci_low) / j)


@pytest.mark.parametrize(
    ("counts", "reason"),
    [
        ({"tp": 0, "fn": 0, "tn": 5, "fp": 1}, "no human passes"),
        ({"tp": 5, "fn": 1, "tn": 0, "fp": 0}, "no human fails"),
        ({"tp": 5, "fn": 5, "tn": 5, "fp": 5}, "no better than chance"),
        ({"tp": 2, "fn": 8, "tn": 3, "fp": 7}, "no better than chance"),
    ],
)
def test_it_is_undefined_with_a_reason(counts, reason):
    r = corrected_rate_interval([3, 4], [5, 5], **counts)
    assert (r.estimate, r.ci_low, r.ci_high, r.se) == (None, None, None, None)
    assert reason in r.reason
    assert r.raw.mean == 0.7  # the raw figure is still there to show


def test_it_is_undefined_without_verdicts():
    r = corrected_rate_interval([], [], tp=9, fn=1, tn=9, fp=1)
    assert r.estimate is None and "no judge verdicts" in r.reason


@pytest.mark.parametrize("bad", [{"tp": -1}, {"fn": 1.5}, {"tn": True}])
def test_it_refuses_bad_calibration_counts(bad):
    counts = {"tp": 9, "fn": 1, "tn": 9, "fp": 1} | bad
    with pytest.raises(ValueError, match="non-negative integer"):
        corrected_rate_interval([3], [5], **counts)


suites = st.lists(st.tuples(st.integers(0, 10), st.integers(1, 10)), min_size=1, max_size=30).map(
    lambda cases: [(x % (n + 1), n) for x, n in cases]
)
calibrations = st.tuples(
    st.integers(1, 120), st.integers(0, 100), st.integers(1, 120), st.integers(0, 100)
).map(
    lambda c: (
        c[0] - c[1] % (c[0] + 1),
        c[1] % (c[0] + 1),
        c[2] - c[3] % (c[2] + 1),
        c[3] % (c[2] + 1),
    )
)


@FAST
@given(suites, calibrations)
def test_it_is_bounded_contains_its_estimate_and_never_claims_more_than_the_raw_rate(
    cases, calibration
):
    tp, fn, tn, fp = calibration
    passed, graded = zip(*cases, strict=True)
    r = corrected_rate_interval(passed, graded, tp=tp, fn=fn, tn=tn, fp=fp)
    if r.estimate is None:
        assert tp / (tp + fn) + tn / (tn + fp) <= 1
        return
    raw, j = r.raw, r.tpr + r.tnr - 1
    assert 0.0 <= r.ci_low <= r.estimate <= r.ci_high <= 1.0
    assert r.ci_high - r.ci_low >= min(1.0, (raw.ci_high - raw.ci_low) / j) - 1e-12
    # ... and contains the Rogan–Gladen image of the raw interval.
    image = [min(1, max(0, rg(q, r.tpr, r.tnr))) for q in (raw.ci_low, raw.ci_high)]
    assert r.ci_low <= image[0] + 1e-12 and image[1] - 1e-12 <= r.ci_high


@FAST
@given(suites, calibrations)
def test_it_is_symmetric_under_swapping_pass_and_fail(cases, calibration):
    tp, fn, tn, fp = calibration
    passed, graded = zip(*cases, strict=True)
    r = corrected_rate_interval(passed, graded, tp=tp, fn=fn, tn=tn, fp=fp)
    # Swapping pass and fail everywhere: tpr <-> tnr, q -> 1 - q, θ -> 1 - θ.
    s = corrected_rate_interval([n - x for x, n in cases], graded, tp=tn, fn=fp, tn=tp, fp=fn)
    if r.estimate is None:
        assert s.estimate is None
        return
    assert s.estimate == pytest.approx(1 - r.estimate, abs=1e-9)
    assert (s.ci_low, s.ci_high) == pytest.approx((1 - r.ci_high, 1 - r.ci_low), abs=1e-9)


@FAST
@given(suites, calibrations)
def test_it_widens_with_confidence(cases, calibration):
    tp, fn, tn, fp = calibration
    passed, graded = zip(*cases, strict=True)
    narrow = corrected_rate_interval(passed, graded, tp=tp, fn=fn, tn=tn, fp=fp, confidence=0.8)
    wide = corrected_rate_interval(passed, graded, tp=tp, fn=fn, tn=tn, fp=fp, confidence=0.95)
    if narrow.estimate is not None:
        assert wide.ci_low <= narrow.ci_low + 1e-12 and wide.ci_high >= narrow.ci_high - 1e-12


def test_a_ten_times_larger_calibration_narrows_it():
    passed = [3, 3, 4, 2, 3, 3, 4, 2]
    small = corrected_rate_interval(passed, [5] * 8, tp=18, fn=2, tn=9, fp=1)
    large = corrected_rate_interval(passed, [5] * 8, tp=180, fn=20, tn=90, fp=10)
    assert large.ci_high - large.ci_low < 0.9 * (small.ci_high - small.ci_low)
    assert large.ci_high - large.ci_low >= (large.raw.ci_high - large.raw.ci_low) / 0.8 - 1e-12


# -------------------------------------------------------------------------- fast coverage
@pytest.mark.parametrize(
    ("theta", "tpr", "tnr", "c", "k", "n_cal"),
    [(0.8, 0.95, 0.8, 12, 3, 30), (0.5, 0.9, 0.9, 30, 5, 100), (0.95, 0.99, 0.7, 5, 3, 100)],
)
def test_coverage_of_the_true_rate_is_near_nominal(theta, tpr, tnr, c, k, n_cal):
    rng = np.random.default_rng(7)
    sims, hits, defined = 300, 0, 0
    n_pos = round(0.7 * n_cal)
    rates = rng.beta(theta * 5, (1 - theta) * 5, (sims, c))  # cases differ
    passed = rng.binomial(k, tpr * rates + (1 - tnr) * (1 - rates))
    tp = rng.binomial(n_pos, tpr, sims)
    tn = rng.binomial(n_cal - n_pos, tnr, sims)
    for s in range(sims):
        r = corrected_rate_interval(
            passed[s],
            [k] * c,
            tp=int(tp[s]),
            fn=int(n_pos - tp[s]),
            tn=int(tn[s]),
            fp=int(n_cal - n_pos - tn[s]),
        )
        if r.estimate is not None:
            defined += 1
            hits += r.ci_low <= theta <= r.ci_high
    assert defined >= 0.95 * sims
    assert hits / defined >= 0.90
