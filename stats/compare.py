"""Comparing a head run with a base run on the same suite, case by case.

Data shape, for every function here: ``base`` and ``head`` are sequences over cases (paired
by position) of per-trial outcomes (sequences of booleans); trial counts may differ per case
and per side, but every case needs at least one trial on each side (ValueError otherwise).

The statistic is the mean over cases of (head pass rate − base pass rate): each case
weighs the same, as in the run report. Randomness lives inside each case, so the null
distribution and the interval keep the cases fixed and move only trials (DESIGN.md,
principle 6). For the "in general" question (would this hold on other cases like these?)
``clustered_paired_interval`` treats cases as a sample (Miller 2024).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache, reduce

import numpy as np
from scipy.signal import fftconvolve
from scipy.stats import hypergeom, norm
from scipy.stats import t as student_t

from stats.intervals import clopper_pearson_interval

# Exact computation while the integer grid of the statistic stays this small.
EXACT_GRID_LIMIT = 4_000_000


@dataclass(frozen=True)
class PermutationResult:
    """``delta``: observed mean over cases of head − base pass rate, in [−1, 1];
    ``p_value`` in (0, 1]; ``exact``: True when computed from the whole permutation
    distribution, False for Monte Carlo; ``n_resamples``: resamples drawn (0 when exact);
    ``n_cases``: cases compared."""

    delta: float
    p_value: float
    exact: bool
    n_resamples: int
    n_cases: int


@dataclass(frozen=True)
class Interval:
    """A point estimate with an interval; ``low``/``high`` are None when undefined
    (``reason`` says why)."""

    estimate: float
    low: float | None
    high: float | None
    confidence: float
    method: str
    reason: str = ""


def _counts(
    base: Sequence[Sequence[bool]], head: Sequence[Sequence[bool]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-case arrays: base trials, base passes, head trials, head passes (int64)."""
    if len(base) != len(head):
        raise ValueError(f"base has {len(base)} cases, head has {len(head)}: pair them by case")
    if len(base) == 0:
        raise ValueError("no cases to compare")
    nb = np.fromiter((len(x) for x in base), dtype=np.int64, count=len(base))
    nh = np.fromiter((len(x) for x in head), dtype=np.int64, count=len(head))
    empty = np.flatnonzero((nb == 0) | (nh == 0))
    if empty.size:
        raise ValueError(f"case at position {int(empty[0])} has no trials on one side")
    sb = np.fromiter((sum(bool(v) for v in x) for x in base), dtype=np.int64, count=len(base))
    sh = np.fromiter((sum(bool(v) for v in x) for x in head), dtype=np.int64, count=len(head))
    return nb, sb, nh, sh


def _exact_p_value(
    nb: np.ndarray,
    nh: np.ndarray,
    s: np.ndarray,
    observed_numerators: int,
    scale: int,
    alternative: str,
) -> float | None:
    """Exact permutation p-value by convolving per-case distributions on an integer grid.

    Per case, relabeling trials uniformly at random puts k of the case's s passes on the
    head side with hypergeometric probability C(s, k) C(m − s, nh − k) / C(m, nh); the case
    then contributes k/nh − (s − k)/nb. On the grid ``scale`` (a common denominator) each
    contribution is an integer, so the distribution of the sum is a chain of discrete
    convolutions. Returns None when the grid would exceed EXACT_GRID_LIMIT.
    """

    kernels = []
    offset = 0
    span = 0
    for nb_i, nh_i, s_i in zip(nb.tolist(), nh.tolist(), s.tolist(), strict=True):
        m_i = nb_i + nh_i
        k_lo, k_hi = max(0, s_i - nb_i), min(s_i, nh_i)
        ks = np.arange(k_lo, k_hi + 1)
        probs = hypergeom.pmf(ks, m_i, s_i, nh_i)
        # contribution * scale = (k*(nb+nh) - s*nh) * scale / (nh*nb), an integer
        unit = scale // (nh_i * nb_i)
        values = (ks * m_i - s_i * nh_i) * unit
        step = m_i * unit
        kernel = np.zeros(int((k_hi - k_lo) * step) + 1)
        kernel[((ks - k_lo) * step).astype(np.int64)] = probs
        kernels.append(kernel)
        offset += int(values[0])
        span += kernel.size - 1
        if span + 1 > EXACT_GRID_LIMIT:
            return None
    dist = _convolve_all(kernels)
    grid = np.arange(dist.size, dtype=np.int64) + offset
    observed = int(observed_numerators)
    if alternative == "two-sided":
        mask = np.abs(grid) >= abs(observed)
    elif alternative == "greater":
        mask = grid >= observed
    else:
        mask = grid <= observed
    return float(min(1.0, dist[mask].sum()))


def _convolve_all(kernels: list[np.ndarray]) -> np.ndarray:
    """Convolution of many small distributions, pairwise in a balanced tree (FFT for large
    pairs), so the cost is O(S log S log n) for a final support S rather than O(S n)."""

    layer = kernels
    while len(layer) > 1:
        nxt = []
        for i in range(0, len(layer) - 1, 2):
            a, b = layer[i], layer[i + 1]
            if min(a.size, b.size) > 64:
                c = np.clip(fftconvolve(a, b), 0.0, None)
            else:
                c = np.convolve(a, b)
            nxt.append(c)
        if len(layer) % 2:
            nxt.append(layer[-1])
        layer = nxt
    return layer[0]


def stratified_permutation_test(
    base: Sequence[Sequence[bool]],
    head: Sequence[Sequence[bool]],
    n_resamples: int = 10_000,
    seed: int | None = None,
    alternative: str = "two-sided",
    method: str = "auto",
) -> PermutationResult:
    """Case-stratified paired permutation test of head vs base pass rates.

    Statistic: mean over cases of (head pass rate − base pass rate). Null: within each
    case, the base/head labels of its trials are exchangeable; trials never move between
    cases (cases are the strata; tags play no part).

    Steps:
    1. Per case, count trials and passes on each side; s = passes pooled.
    2. If the permutation distribution fits an integer grid of at most EXACT_GRID_LIMIT
       points, compute it exactly by convolution of per-case hypergeometric distributions
       (this equals enumerating every relabeling); ``exact=True``.
    3. Otherwise Monte Carlo: draw per case the number of passes a random relabeling gives
       head (hypergeometric); cases sharing (nb, nh, s) are drawn together, as the sum of
       their head passes, from that sum's exact distribution (the group's pmf convolved
       with itself once per case: ``_iid_sum_pmf``) by the inverse CDF, one uniform per
       resample and group; vectorised over ``n_resamples``, and report
       p = (b + 1)/(m + 1), b = resamples at least as extreme (Phipson & Smyth 2010), so
       p is never 0.

    ``alternative``: "two-sided" (|T| ≥ |t|), "greater" (head better) or "less".
    ``method``: "auto" (exact when it fits, else Monte Carlo), "exact" (ValueError when it
    does not fit) or "monte-carlo".
    A suite where nothing can change (every case all-pass or all-fail on both sides)
    gives p = 1. Reference: Good, *Permutation, Parametric and Bootstrap Tests of
    Hypotheses* (2005), ch. 3 (stratified permutation tests).

    Raises ValueError for unpaired or empty input, or an unknown ``alternative``.
    """
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative: {alternative!r} (two-sided, greater, less)")
    if n_resamples < 1:
        raise ValueError("n_resamples must be at least 1")
    if method not in ("auto", "exact", "monte-carlo"):
        raise ValueError(f"method: {method!r} (auto, exact, monte-carlo)")
    nb, sb, nh, sh = _counts(base, head)
    n_cases = int(nb.size)
    s = sb + sh
    delta = float(np.mean(sh / nh - sb / nb))

    if method != "monte-carlo":
        scale = reduce(math.lcm, (int(a) * int(b) for a, b in zip(nb, nh, strict=True)), 1)
        p = None
        if scale <= EXACT_GRID_LIMIT:
            unit = scale // (nh * nb)
            observed = int(np.sum((sh * nb - sb * nh) * unit))
            p = _exact_p_value(nb, nh, s, observed, scale, alternative)
        if p is not None:
            return PermutationResult(delta, max(p, np.finfo(float).tiny), True, 0, n_cases)
        if method == "exact":
            raise ValueError("exact: the permutation distribution is too large; use monte-carlo")

    # A case whose trials all agree (s = 0 or s = m) contributes 0 under every relabeling
    # (1 − 1 or 0 − 0): draw only the others. Cases with the same (nb, nh, s) are i.i.d.
    # under the null and each contributes k/nh − (s − k)/nb, affine in its head passes k,
    # so the group contributes K/nh − (g·s − K)/nb with K the sum of its g cases' k: K is
    # drawn from its exact distribution (the same distribution as drawing the cases one by
    # one, at a cost independent of the number of resamples but for one uniform each).

    m = nb + nh
    varies = (s > 0) & (s < m)
    rng = np.random.default_rng(seed)
    null = np.zeros(n_resamples)
    triples = np.stack([nb[varies], nh[varies], s[varies]], axis=1)
    if triples.size:
        groups, sizes = np.unique(triples, axis=0, return_counts=True)
        for (nb_g, nh_g, s_g), g in zip(groups.tolist(), sizes.tolist(), strict=True):
            k_lo, pmf = _pmf(nb_g, nh_g, s_g)
            cdf = np.cumsum(_iid_sum_pmf(np.asarray(pmf), g))
            draws = np.searchsorted(cdf, rng.random(n_resamples) * cdf[-1], side="right")
            k_sum = np.minimum(draws, cdf.size - 1) + g * k_lo
            null += k_sum / nh_g - (g * s_g - k_sum) / nb_g
    null /= n_cases
    tol = 1e-9
    if alternative == "two-sided":
        extreme = np.abs(null) >= abs(delta) - tol
    elif alternative == "greater":
        extreme = null >= delta - tol
    else:
        extreme = null <= delta + tol
    b = int(np.count_nonzero(extreme))
    return PermutationResult(delta, (b + 1) / (n_resamples + 1), False, n_resamples, n_cases)


def _iid_sum_pmf(pmf: np.ndarray, g: int) -> np.ndarray:
    """The pmf of the sum of ``g`` >= 1 independent draws from ``pmf`` (on 0..len − 1), on
    0..g·(len − 1): ``pmf`` convolved with itself g − 1 times, by squaring (O(log g)
    convolutions; FFT once direct convolution would cost more than 4·10^6 products, with
    the round-off below 0 clipped)."""

    def conv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.size * b.size > 4_000_000:
            return np.clip(fftconvolve(a, b), 0.0, None)
        return np.convolve(a, b)

    out: np.ndarray | None = None
    power = pmf
    while True:
        if g & 1:
            out = power if out is None else conv(out, power)
        g >>= 1
        if not g:
            assert out is not None  # g >= 1: its top bit set it
            return out
        power = conv(power, power)


def within_case_interval(
    base: Sequence[Sequence[bool]],
    head: Sequence[Sequence[bool]],
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Interval for the mean over cases of (head − base) pass rate with the cases held fixed
    ("on these cases": only the trials are random), never of zero width. Returns (low, high)
    in [−1, 1], ``low < high`` always, and the observed difference inside.

    **Estimand.** δ = (1/C) Σ_i (p_hi − p_bi), the cases' own (fixed) pass rates on each side.

    **Method**: the MOVER for a difference of proportions (Newcombe 1998, "Interval
    estimation for the difference between independent proportions: comparison of eleven
    methods", Stat. Med. 17(8):873–890, method 10; Zou & Donner 2008, Stat. Med.
    27(10):1693–1702) with Clopper–Pearson limits (Clopper & Pearson 1934) in place of
    Wilson's, applied to each side's mean of per-case rates m with the Kish effective trial
    count ``n_K = C² / Σ 1/n_i`` (the total trial count when every case has the same number
    of trials):

        [l, u] = Clopper–Pearson interval of m·n_K successes in n_K trials
        low  = δ̂ − sqrt((m_h − l_h)² + (u_b − m_b)²)
        high = δ̂ + sqrt((u_h − m_h)² + (m_b − l_b)²)

    and the union of that with the Agresti–Caffo interval (Agresti & Caffo 2000, "Simple and
    effective confidence intervals for proportions and differences of proportions result from
    adding two successes and two failures", Am. Stat. 54(4):280–288) of the same counts:
    ``(ã_h − ã_b) ± z·sqrt(ã_h(1 − ã_h)/(n_K,h + 2) + ã_b(1 − ã_b)/(n_K,b + 2))`` with
    ``ã = (m·n_K + 1)/(n_K + 2)``.

    Why both: Newcombe's Wilson version covered only 0.88–0.90 in some cells near the bounds
    (rates 0.98 → 0.02) in ``bench/bench_intervals.py``; Clopper–Pearson limits raised those to
    0.92–0.93 (15 trials a side: the MOVER's known dip where both sides sit at a bound, the
    quadrature of two skewed one-sided distances); the Agresti–Caffo interval, centred away
    from the bounds, covers there, and the union keeps every measured cell at least 0.95 − 2
    SE at almost no cost in width elsewhere.

    Why pooled: for fixed cases with equal trial counts, Var(m) = Σ p_i(1 − p_i) / (n C²) is
    at most m̄(1 − m̄)/(nC), the binomial variance of all trials at their mean rate (rates that
    differ between cases only lower it), so the interval errs on the wide side. A per-case
    variance (the within-case percentile bootstrap this replaces) collapses to zero width
    whenever every case is all-pass or all-fail, and always with one trial per case; a
    Jeffreys-posterior parametric bootstrap per case avoids zero width but shrinks every
    case towards 1/2 by (1/2 − p)/(n + 1), a bias that grows against the SE as cases are
    added (it misses a true δ of −1 entirely). With unequal trial counts (top-up) n_K keeps
    the variance bound exact when the rates are equal or near 1/2.

    Wider than the old bootstrap when case rates are spread (about 1.2× for rates uniform on
    (0, 1)). Raises ValueError for
    unpaired or empty input or a confidence outside (0, 1).
    """
    nb, sb, nh, sh = _counts(base, head)
    return within_case_interval_from_counts(nb, sb, nh, sh, confidence=confidence)


def within_case_interval_from_counts(
    base_graded: np.ndarray,
    base_passed: np.ndarray,
    head_graded: np.ndarray,
    head_passed: np.ndarray,
    *,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """``within_case_interval`` from per-case counts (1-D arrays of one length, graded >= 1,
    0 <= passed <= graded; not checked here — the caller's arrays come from ``_counts`` or a
    simulation). Raises ValueError for a confidence outside (0, 1)."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    nb, sb = np.asarray(base_graded), np.asarray(base_passed)
    nh, sh = np.asarray(head_graded), np.asarray(head_passed)
    z = float(norm.ppf(0.5 + confidence / 2))
    sides = []
    for n_side, s_side in ((nh, sh), (nb, sb)):
        mean = float((s_side / n_side).mean())
        n_kish = n_side.size**2 / float((1.0 / n_side).sum())
        low, high = clopper_pearson_interval(min(mean * n_kish, n_kish), n_kish, confidence)
        sides.append((mean, low, high, (mean * n_kish + 1.0) / (n_kish + 2.0), n_kish + 2.0))
    (m_h, l_h, u_h, a_h, n_h), (m_b, l_b, u_b, a_b, n_b) = sides
    delta = m_h - m_b
    low = delta - math.hypot(m_h - l_h, u_b - m_b)
    high = delta + math.hypot(u_h - m_h, m_b - l_b)
    # Agresti–Caffo: one success and one failure added to each side, then Wald.
    center = a_h - a_b
    half = z * math.sqrt(a_h * (1.0 - a_h) / n_h + a_b * (1.0 - a_b) / n_b)
    return max(-1.0, min(low, center - half)), min(1.0, max(high, center + half))


def clustered_paired_interval(
    base: Sequence[Sequence[bool]],
    head: Sequence[Sequence[bool]],
    confidence: float = 0.95,
) -> Interval:
    """The "in general" interval: cases as a sample from a larger population, never of zero
    width.

    d_i = head rate − base rate of case i; estimate = mean(d); SE = sd(d, ddof=1)/sqrt(C)
    (Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640, §4 paired differences with
    clustering on cases) with the Student t quantile on C − 1 degrees of freedom (the SE rests
    on C cases). The interval is the union of that and ``within_case_interval``: a population
    of cases is never known better than the cases at hand, and when every case moved by the
    same observed amount (sd 0: every case 5/5 → 0/5, say) the trials' own randomness is all
    that is left. With one case there is no spread: the interval is None with that reason.
    Raises ValueError as ``stratified_permutation_test``.
    """
    nb, sb, nh, sh = _counts(base, head)
    d = sh / nh - sb / nb
    estimate = float(d.mean())
    method = "clustered SE over cases, t with C − 1 df (Miller 2024)"
    if d.size < 2:
        return Interval(estimate, None, None, confidence, method, "one case: no spread")
    se = float(d.std(ddof=1) / math.sqrt(d.size))
    t = float(student_t.ppf(0.5 + confidence / 2, d.size - 1))
    floor_low, floor_high = within_case_interval(base, head, confidence)
    return Interval(
        estimate,
        max(-1.0, min(estimate - t * se, floor_low)),
        min(1.0, max(estimate + t * se, floor_high)),
        confidence,
        method,
    )


@dataclass(frozen=True)
class DropTest:
    """The one-sided case-stratified exact test of "head lower", from counts.

    ``delta``: mean over cases of (head − base) pass rate, in [−1, 1] (for display);
    ``statistic``: the head's passes summed over cases; ``p_value`` = P(statistic <= observed)
    under the permutation null, in (0, 1]; ``support``: the attainable p-values given the
    margins, ascending, the last 1 (the null CDF of the p-value is
    ``F(u) = max{v in support : v <= u}``); ``n_cases``: cases compared (cases whose trials
    all agree included)."""

    delta: float
    statistic: int
    p_value: float
    support: np.ndarray
    n_cases: int

    def size_at(self, level: float) -> float:
        """The exact probability of p <= ``level`` under the null given the margins: the
        part of ``level`` that a test at that level really spends."""
        i = int(np.searchsorted(self.support, level * (1 + 1e-12), side="right"))
        return float(self.support[i - 1]) if i else 0.0


@lru_cache(maxsize=65_536)
def _pmf(n_base: int, n_head: int, s: int) -> tuple[int, tuple[float, ...]]:
    """``(k_lo, pmf)``: the head's passes K given the margins, hypergeometric over
    ``k_lo..k_hi``, from exact integer binomials."""
    m = n_base + n_head
    k_lo, k_hi = max(0, s - n_base), min(s, n_head)
    total = math.comb(m, n_head)
    return k_lo, tuple(
        math.comb(s, k) * math.comb(m - s, n_head - k) / total for k in range(k_lo, k_hi + 1)
    )


def stratified_drop_test(
    *,
    base_passed: Sequence[int],
    base_graded: Sequence[int],
    head_passed: Sequence[int],
    head_graded: Sequence[int],
) -> DropTest:
    """The exact one-sided case-stratified permutation test that head's pass rate is lower.

    All four arguments have shape (C,), paired by case; every case needs a graded trial on
    each side. Null: within each case the base/head labels of its trials are exchangeable
    (cases are strata; Good 2005, ch. 3). Statistic: the head's passes summed over cases,
    ``S = Σ_i h_i``; given the margins each case's head passes are hypergeometric and
    independent across cases, so the null distribution of S is the convolution of the
    per-case pmfs and ``p = P(S <= s_obs)``, exact (no grid limit, no Monte Carlo: S is an
    integer below Σ n_h).

    S is the sufficient statistic of a common odds ratio across the cases' 2 x 2 tables, so
    this is the exact conditional test of "odds ratio = 1" against "< 1" (Cox 1970, *The
    Analysis of Binary Data*, §4; Mehta, Patel & Gray 1985, JASA 80:969–973), the exact
    version of the Mantel–Haenszel test (Mantel & Haenszel 1959). When every case has the
    same trial counts on each side (n_b,i = n_b, n_h,i = n_h) the statistic of
    ``stratified_permutation_test`` (mean over cases of the rate differences) is an
    increasing affine function of S, so the two tests give the same p-value.
    A 100-case suite takes well under a millisecond.
    Raises ValueError for mismatched lengths, no cases, counts out of range, or an empty side.
    """
    b = np.asarray(base_passed, dtype=np.int64)
    nb = np.asarray(base_graded, dtype=np.int64)
    h = np.asarray(head_passed, dtype=np.int64)
    nh = np.asarray(head_graded, dtype=np.int64)
    if not (b.shape == nb.shape == h.shape == nh.shape) or b.ndim != 1:
        raise ValueError("base_passed, base_graded, head_passed, head_graded: same length")
    if b.size == 0:
        raise ValueError("no cases to compare")
    if np.any(nb < 1) or np.any(nh < 1):
        raise ValueError("every case needs at least one graded trial on each side")
    if np.any(b < 0) or np.any(h < 0) or np.any(b > nb) or np.any(h > nh):
        raise ValueError("need 0 <= passed <= graded on each side")
    delta = float(np.mean(h / nh - b / nb))
    s = b + h
    dist = np.ones(1)
    k_low = 0
    # Cases with the same (n_b, n_h, s) share a pmf; the balanced-tree convolution keeps the
    # cost near linear in the final support.
    kernels = []
    for n_b, n_h, s_i in zip(nb.tolist(), nh.tolist(), s.tolist(), strict=True):
        k_lo, pmf = _pmf(n_b, n_h, s_i)
        k_low += k_lo
        if len(pmf) > 1:
            kernels.append(np.asarray(pmf))
    if kernels:
        dist = _convolve_all(kernels)
    statistic = int(h.sum())
    cdf = np.minimum(1.0, np.cumsum(dist))
    p = float(cdf[statistic - k_low])
    support = cdf[dist > 0]
    support[-1] = 1.0
    return DropTest(delta, statistic, max(p, np.finfo(float).tiny), support, int(b.size))
