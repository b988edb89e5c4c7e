"""Comparing a head run with a base run on the same suite, case by case.

``base`` and ``head`` are sequences over cases (paired by position) of per-trial booleans;
trial counts may differ, but every case needs a trial on each side (``ValueError``). The
statistic is the mean over cases of (head − base) pass rate. Randomness lives inside each
case, so tests and intervals keep cases fixed; ``clustered_paired_interval`` treats them as
a sample (Miller 2024). Why: docs/statistics.md."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache, reduce

import numpy as np
from scipy.signal import fftconvolve
from scipy.special import betaincinv
from scipy.stats import hypergeom, norm
from scipy.stats import t as student_t

from stats.intervals import clopper_pearson_interval

# Exact computation while the integer grid of the statistic stays this small.
EXACT_GRID_LIMIT = 4_000_000


@dataclass(frozen=True)
class PermutationResult:
    """``delta`` in [−1, 1]; ``p_value`` in (0, 1]; ``exact`` (else Monte Carlo);
    ``n_resamples`` (0 when exact); ``n_cases``."""

    delta: float
    p_value: float
    exact: bool
    n_resamples: int
    n_cases: int


@dataclass(frozen=True)
class Interval:
    """An estimate with ``low``/``high``, None when undefined (``reason``)."""

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
    """Exact permutation p-value: per case, k of its s passes land on the head side with
    probability C(s, k) C(m − s, nh − k) / C(m, nh), contributing k/nh − (s − k)/nb; on the
    integer grid ``scale`` the sum's law is a chain of convolutions. None past
    ``EXACT_GRID_LIMIT``."""

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
    """Convolve many small pmfs pairwise in a balanced tree (FFT for large pairs):
    O(S log S log n)."""

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
    """Case-stratified paired permutation test of head vs base pass rates (Good 2005, *Permutation,
    Parametric and Bootstrap Tests of Hypotheses*, ch. 3).

    Null: within each case, base/head labels of its trials are exchangeable. Exact by
    convolution of per-case hypergeometric laws when the grid fits ``EXACT_GRID_LIMIT``;
    otherwise Monte Carlo, cases sharing (nb, nh, s) drawn together from their sum's exact law
    (``_iid_sum_pmf``), with p = (b + 1)/(m + 1) (Phipson & Smyth 2010), never 0.
    ``alternative``: "two-sided", "greater" (head better), "less"; ``method``: "auto",
    "exact" (``ValueError`` when it does not fit) or "monte-carlo". Nothing can change: p = 1.
    Raises ``ValueError`` for unpaired or empty input or an unknown ``alternative``."""
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
    """The pmf of the sum of ``g`` >= 1 draws from ``pmf``, on 0..g·(len − 1), by squaring
    (FFT past 4·10^6 products, round-off below 0 clipped)."""

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
    """Interval for δ = (1/C) Σ_i (p_hi − p_bi) with the cases fixed: (low, high) in [−1, 1],
    ``low < high``, the estimate inside.

    MOVER for a difference (Newcombe 1998, Stat. Med. 17(8):873–890, method 10; Zou & Donner
    2008, Stat. Med. 27(10):1693–1702) with Clopper–Pearson limits (1934) of each side's mean
    rate m on its Kish count ``n_K = C² / Σ 1/n_i``:

        [l, u] = Clopper–Pearson of m·n_K successes in n_K trials
        low  = δ̂ − sqrt((m_h − l_h)² + (u_b − m_b)²)
        high = δ̂ + sqrt((u_h − m_h)² + (m_b − l_b)²)

    united with the Agresti–Caffo interval (Agresti & Caffo 2000, Am. Stat. 54(4):280–288)
    ``(ã_h − ã_b) ± z·sqrt(ã_h(1 − ã_h)/(n_K,h + 2) + ã_b(1 − ã_b)/(n_K,b + 2))``,
    ``ã = (m·n_K + 1)/(n_K + 2)``, which covers where the MOVER dips near the bounds. Pooling a
    side's trials bounds the fixed-case variance from above. Why, and coverage:
    docs/statistics.md, bench/bench_intervals.py. Raises ``ValueError`` for unpaired or empty
    input or a confidence outside (0, 1)."""
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
    """``within_case_interval`` from per-case count arrays (not checked: graded >= 1, passed in
    range). Raises ``ValueError`` for a confidence outside (0, 1)."""
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


def case_intervals_from_counts(
    base_graded: np.ndarray,
    base_passed: np.ndarray,
    head_graded: np.ndarray,
    head_passed: np.ndarray,
    *,
    confidence: float = 0.95,
) -> tuple[np.ndarray, np.ndarray]:
    """Per case i, the interval of head − base pass rate on that case's trials alone:
    ``within_case_interval_from_counts`` on the one case (its Kish count is its trial count),
    vectorised over cases. Returns ``(low, high)`` arrays in [−1, 1], equal to the scalar
    function's to rounding. Raises ``ValueError`` for a confidence outside (0, 1), a case
    with no graded trial on a side, or passes outside [0, graded]."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    nb, sb = np.asarray(base_graded, dtype=float), np.asarray(base_passed, dtype=float)
    nh, sh = np.asarray(head_graded, dtype=float), np.asarray(head_passed, dtype=float)
    if (nb < 1).any() or (nh < 1).any():
        raise ValueError("every case needs a graded trial on each side")
    if (sb < 0).any() or (sb > nb).any() or (sh < 0).any() or (sh > nh).any():
        raise ValueError("passes must be in [0, graded]")
    alpha = 1.0 - confidence
    z = float(norm.ppf(0.5 + confidence / 2))

    def exact(x: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # Clopper–Pearson as stats.intervals._clopper_pearson, the limits' arguments kept
        # valid where the closed form (0 at x = 0, 1 at x = n) applies.
        p = x / n
        low = np.where(x <= 0, 0.0, betaincinv(np.maximum(x, 1e-300), n - x + 1.0, alpha / 2))
        high = np.where(x >= n, 1.0, betaincinv(x + 1.0, np.maximum(n - x, 1e-300), 1 - alpha / 2))
        return p, np.minimum(low, p), np.maximum(high, p)

    m_h, l_h, u_h = exact(sh, nh)
    m_b, l_b, u_b = exact(sb, nb)
    delta = m_h - m_b
    low = delta - np.hypot(m_h - l_h, u_b - m_b)
    high = delta + np.hypot(u_h - m_h, m_b - l_b)
    a_h, a_b = (sh + 1.0) / (nh + 2.0), (sb + 1.0) / (nb + 2.0)
    half = z * np.sqrt(a_h * (1.0 - a_h) / (nh + 2.0) + a_b * (1.0 - a_b) / (nb + 2.0))
    center = a_h - a_b
    return np.maximum(-1.0, np.minimum(low, center - half)), np.minimum(
        1.0, np.maximum(high, center + half)
    )


def clustered_paired_interval(
    base: Sequence[Sequence[bool]],
    head: Sequence[Sequence[bool]],
    confidence: float = 0.95,
) -> Interval:
    """The "in general" interval, cases a sample: d_i = head − base rate of case i, mean(d) ±
    t_{C−1} · sd(d)/sqrt(C) (Miller 2024, arXiv:2411.00640, §4), united with
    ``within_case_interval`` (a population is never known better than its cases). One case:
    None with a reason. Raises ``ValueError`` as ``stratified_permutation_test``."""
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
    """The one-sided stratified exact test of "head lower": ``delta`` in [−1, 1];
    ``statistic`` the head's passes summed; ``p_value`` = P(S <= observed) in (0, 1];
    ``support`` the attainable p-values, ascending, last 1; ``n_cases``."""

    delta: float
    statistic: int
    p_value: float
    support: np.ndarray
    n_cases: int

    def size_at(self, level: float) -> float:
        """Exact null probability of p <= ``level`` given the margins (what the test spends)."""
        i = int(np.searchsorted(self.support, level * (1 + 1e-12), side="right"))
        return float(self.support[i - 1]) if i else 0.0


@lru_cache(maxsize=65_536)
def _pmf(n_base: int, n_head: int, s: int) -> tuple[int, tuple[float, ...]]:
    """``(k_lo, pmf)``: the head's passes given the margins, hypergeometric, exact binomials."""
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
    """Exact one-sided case-stratified permutation test that head's pass rate is lower.

    Four arrays of shape (C,), a graded trial on each side per case. S = Σ_i h_i; given the
    margins each h_i is hypergeometric and independent, so S's null law is the convolution and
    p = P(S <= s_obs), exact. S is sufficient for a common odds ratio, so this is the exact
    conditional test of OR = 1 vs < 1 (Cox 1970, *The Analysis of Binary Data*, §4; Mehta,
    Patel & Gray 1985, JASA 80:969–973), the exact Mantel–Haenszel test; with equal trial
    counts it equals ``stratified_permutation_test``. Raises ``ValueError`` for mismatched
    lengths, no cases, counts out of range, or an empty side."""
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
