"""Per-case exact tests and discrete family-wise procedures against scipy and brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import fisher_exact, hypergeom
from statsmodels.stats.multitest import multipletests

from stats.discrete import (
    discrete_holm,
    drop_p_value,
    drop_support,
    min_p_value,
    support_cdf,
    tarone_holm,
)

# A case: (base passed, base graded, head passed, head graded), small enough to enumerate.
case = st.tuples(st.integers(1, 8), st.integers(1, 8)).flatmap(
    lambda n: st.tuples(st.integers(0, n[0]), st.just(n[0]), st.integers(0, n[1]), st.just(n[1]))
)
FAST = settings(max_examples=80, deadline=None)


def kw(c):
    b, nb, h, nh = c
    return {"base_passed": b, "base_graded": nb, "head_passed": h, "head_graded": nh}


@FAST
@given(case)
def test_the_drop_p_value_is_scipys_one_sided_fisher_exact_test(c):
    b, nb, h, nh = c
    ours = drop_p_value(**kw(c))
    table = [[h, nh - h], [b, nb - b]]
    assert ours == pytest.approx(fisher_exact(table, alternative="less").pvalue, rel=1e-9)
    assert ours == pytest.approx(hypergeom.cdf(h, nb + nh, b + h, nh), rel=1e-9)


@FAST
@given(case)
def test_the_support_is_the_exact_null_law_of_the_p_value(c):
    """Enumerate every head count the margins allow: P(p <= u) = F(u) <= u."""
    b, nb, h, nh = c
    s, m = b + h, nb + nh
    support = drop_support(**kw(c))
    assert support[-1] == 1.0 and np.all(np.diff(support) > 0)
    assert drop_p_value(**kw(c)) in support
    assert min_p_value(**kw(c)) == support[0]
    ks = range(max(0, s - nb), min(s, nh) + 1)
    law = {k: math.comb(s, k) * math.comb(m - s, nh - k) / math.comb(m, nh) for k in ks}
    pvals = {
        k: drop_p_value(base_passed=s - k, base_graded=nb, head_passed=k, head_graded=nh)
        for k in ks
    }
    for u in support:
        exact = sum(pr for k, pr in law.items() if pvals[k] <= u * (1 + 1e-12))
        assert support_cdf(support, u) == pytest.approx(exact, abs=1e-12)
        assert support_cdf(support, u) <= u * (1 + 1e-12)


def test_a_case_that_never_failed_or_failed_once_in_ten_cannot_be_significant():
    assert min_p_value(base_passed=5, base_graded=5, head_passed=5, head_graded=5) == 1.0
    assert min_p_value(base_passed=5, base_graded=5, head_passed=4, head_graded=5) == 0.5
    assert min_p_value(base_passed=0, base_graded=5, head_passed=0, head_graded=5) == 1.0


def test_cases_that_cannot_be_significant_do_not_dilute_a_collapse():
    """One case 5/5 → 0/5 among 29 that never failed and one that failed once: p = 1/252,
    adjusted 1/252 (Bonferroni would say 31/252 and miss it at 0.05 / 31)."""
    cases = [(5, 5, 0, 5)] + [(5, 5, 5, 5)] * 29 + [(5, 5, 4, 5)]
    p = [drop_p_value(**kw(c)) for c in cases]
    supports = [drop_support(**kw(c)) for c in cases]
    result = discrete_holm(p_values=p, supports=supports, alpha=0.05)
    assert p[0] == pytest.approx(1 / 252)
    assert result.adjusted[0] == pytest.approx(1 / 252)
    assert result.rejected.tolist() == [True] + [False] * 30
    assert result.size == pytest.approx(1 / 252)
    tarone = tarone_holm(p_values=p, min_p_values=[s[0] for s in supports], alpha=0.05)
    assert tarone.adjusted[0] == pytest.approx(1 / 252)
    assert not multipletests(p, alpha=0.05, method="holm")[0][0]


def brute_discrete_holm(p, supports):
    """The adjusted p-values by their definition, with plain loops."""
    m = len(p)
    order = sorted(range(m), key=lambda j: (p[j], j))
    adjusted = [0.0] * m
    running = 0.0
    for i, j in enumerate(order):
        total = 0.0
        for k in order[i:]:
            total += max([v for v in supports[k] if v <= p[j] * (1 + 1e-12)], default=0.0)
        running = max(running, min(1.0, total))
        adjusted[j] = running
    return adjusted


def brute_tarone_holm(p, mins):
    m = len(p)
    order = sorted(range(m), key=lambda j: (p[j], j))
    adjusted = [0.0] * m
    running = 0.0
    for i, j in enumerate(order):
        q = sum(1 for k in order[i:] if mins[k] <= p[j] * (1 + 1e-12))
        running = max(running, min(1.0, q * p[j]))
        adjusted[j] = running
    return adjusted


families = st.lists(case, min_size=1, max_size=6)


@FAST
@given(families)
def test_discrete_holm_and_tarone_holm_match_their_definitions(cases):
    p = [drop_p_value(**kw(c)) for c in cases]
    supports = [drop_support(**kw(c)) for c in cases]
    ours = discrete_holm(p_values=p, supports=supports, alpha=0.05)
    assert ours.adjusted == pytest.approx(brute_discrete_holm(p, supports), abs=1e-12)
    mins = [s[0] for s in supports]
    tarone = tarone_holm(p_values=p, min_p_values=mins, alpha=0.05)
    assert tarone.adjusted == pytest.approx(brute_tarone_holm(p, mins), abs=1e-12)


@settings(max_examples=30, deadline=None)  # statsmodels' multipletests costs ~40 ms a call
@given(families, st.sampled_from([0.01, 0.05, 0.2]))
def test_discrete_holm_rejects_all_that_tarone_holm_does_and_tarone_all_that_holm_does(
    cases, alpha
):
    p = [drop_p_value(**kw(c)) for c in cases]
    supports = [drop_support(**kw(c)) for c in cases]
    d = discrete_holm(p_values=p, supports=supports, alpha=alpha)
    t = tarone_holm(p_values=p, min_p_values=[s[0] for s in supports], alpha=alpha)
    h = multipletests(p, alpha=alpha, method="holm")
    assert np.all(d.adjusted <= t.adjusted + 1e-12)
    assert np.all(t.adjusted <= h[1] + 1e-12)
    assert np.all(d.rejected >= t.rejected) and np.all(t.rejected >= h[0])


small_case = st.tuples(st.integers(1, 4), st.integers(1, 4)).flatmap(
    lambda n: st.tuples(st.integers(0, n[0]), st.just(n[0]), st.integers(0, n[1]), st.just(n[1]))
)


# At most 3 cases of at most 4 + 4 trials: at most 5³ joint outcomes per example.
@settings(max_examples=25, deadline=None)
@given(st.lists(small_case, min_size=1, max_size=3), st.sampled_from([0.05, 0.2, 0.4]))
def test_the_family_wise_error_given_the_margins_is_at_most_alpha(cases, alpha):
    """Enumerate every joint outcome with the cases' margins fixed (the conditional null):
    the chance of any rejection is at most the reported size, itself at most alpha, for
    both procedures."""
    margins = [(b + h, nb, nh) for b, nb, h, nh in cases]
    laws = []
    for s, nb, nh in margins:
        m = nb + nh
        laws.append(
            [
                (k, math.comb(s, k) * math.comb(m - s, nh - k) / math.comb(m, nh))
                for k in range(max(0, s - nb), min(s, nh) + 1)
            ]
        )
    supports = [
        drop_support(base_passed=s, base_graded=nb, head_passed=0, head_graded=nh)
        if s <= nb
        else drop_support(base_passed=nb, base_graded=nb, head_passed=s - nb, head_graded=nh)
        for s, nb, nh in margins
    ]
    reject_d = reject_t = 0.0
    size = None
    for outcome in itertools.product(*laws):
        prob = math.prod(pr for _, pr in outcome)
        p = [
            drop_p_value(base_passed=s - k, base_graded=nb, head_passed=k, head_graded=nh)
            for (k, _), (s, nb, nh) in zip(outcome, margins, strict=True)
        ]
        d = discrete_holm(p_values=p, supports=supports, alpha=alpha)
        t = tarone_holm(p_values=p, min_p_values=[x[0] for x in supports], alpha=alpha)
        size = d.size
        reject_d += prob * bool(d.rejected.any())
        reject_t += prob * bool(t.rejected.any())
    assert reject_t <= reject_d + 1e-12
    assert reject_d <= size + 1e-12
    assert size <= alpha * (1 + 1e-12)


def test_discrete_holm_reports_its_critical_value_and_size():
    supports = [np.array([0.01, 0.3, 1.0]), np.array([0.02, 1.0]), np.array([1.0])]
    result = discrete_holm(p_values=[0.01, 0.02, 1.0], supports=supports, alpha=0.05)
    # Σ F over all three at 0.02 = 0.01 + 0.02 = 0.03 <= 0.05; at 0.3: 0.3 + 0.02 > 0.05.
    assert result.critical == 0.02
    assert result.size == pytest.approx(0.03)
    # Step 1: F_1(0.01) + F_2(0.01) + F_3(0.01) = 0.01; step 2 (without the first): 0.02.
    assert result.adjusted.tolist() == pytest.approx([0.01, 0.02, 1.0])
    assert result.rejected.tolist() == [True, True, False]


def test_an_empty_family_rejects_nothing():
    result = discrete_holm(p_values=[], supports=[], alpha=0.05)
    assert result.rejected.size == 0 and result.size == 0.0


@pytest.mark.parametrize(
    "bad",
    [
        {"base_passed": 6, "base_graded": 5, "head_passed": 0, "head_graded": 5},
        {"base_passed": 1, "base_graded": 5, "head_passed": -1, "head_graded": 5},
        {"base_passed": 0, "base_graded": 0, "head_passed": 0, "head_graded": 5},
        {"base_passed": True, "base_graded": 5, "head_passed": 0, "head_graded": 5},
    ],
)
def test_it_refuses_impossible_counts(bad):
    with pytest.raises(ValueError):
        drop_p_value(**bad)


def test_it_refuses_a_bad_alpha_or_mismatched_lengths():
    with pytest.raises(ValueError):
        discrete_holm(p_values=[0.1], supports=[[0.1, 1.0]], alpha=1.0)
    with pytest.raises(ValueError):
        discrete_holm(p_values=[0.1, 0.2], supports=[[0.1, 1.0]], alpha=0.05)
    with pytest.raises(ValueError):
        tarone_holm(p_values=[0.1], min_p_values=[0.2], alpha=0.05)
