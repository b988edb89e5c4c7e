"""Which variant of an experiment to ship: a confidence set for the best variant.

An experiment runs one suite with V >= 2 variants on the same C cases. ``passed`` and
``graded`` are integer arrays of shape (V, C). The best variant is the one with the highest
mean over cases of its per-case pass rate (``metric="pass_rate"``) or of its per-case pass^k
(``metric="pass_hat_k"``).

The rule (subset selection, Gupta 1965, Technometrics 7(2):225–245, done with exact pairwise
tests; Hsu 1996, *Multiple Comparisons*, ch. 4, comparisons with the best): variant b is out
when some rival j is significantly better, the one-sided test "b lower than j" at the
per-comparison level ``alpha / (V − 1)``. The true best has V − 1 rivals, so by Bonferroni
P(the true best is put out) <= Σ_j P(test j rejects) <= alpha. Tests between two inferior
variants spend nothing of that guarantee. Tests:

* pass rate: the exact case-stratified test ``stats.compare.stratified_drop_test`` (the exact
  Mantel–Haenszel test of a common odds ratio, valid for these cases under "within a case the
  two variants' trials are exchangeable");
* pass^k: the same null, the permutation test of Σ_c (pass^k_j,c − pass^k_b,c), each
  case's split of its passes hypergeometric: exact on an integer grid, Monte Carlo past it
  (``PASSK_RESAMPLES`` draws, fixed seed; ``passk_drop_p_value``).

A cell with ``graded == 0`` (every trial errored) drops that case for every variant (the
comparison stays paired); ``BestSet.dropped_cases`` lists them and ``reason`` says so. Every
case dropped: ``ValueError``. Why and what the guarantee is not: docs/statistics.md
("Experiments: which variant to ship")."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import comb, stdtrit

from stats.compare import (
    EXACT_GRID_LIMIT,
    _convolve_all,
    _iid_sum_pmf,
    _pmf,
    within_case_interval_from_counts,
)
from stats.intervals import clustered_rate_interval
from stats.passk import difference_interval, pass_hat_k_interval

METRICS = ("pass_rate", "pass_hat_k")
PASSK_RESAMPLES = 20_000
PASSK_SEED = 20_240_601


@dataclass(frozen=True)
class VariantFigure:
    """One variant. ``estimate`` in [0, 1] with its 1 − alpha case-clustered interval
    (``low``, ``high``; None when undefined). Out of the set: ``beaten_by`` the rival whose test
    put it out with the smallest p-value, ``drop`` = estimate(beaten_by) − estimate(self) with
    its interval on these cases, the question the test answers (``drop_low``, ``drop_high``;
    None for one case) and on cases like these in general (``general_low``, ``general_high``:
    cases a sample, wider), both at confidence 1 − 2·level, ``p_value``
    (unadjusted, compared with ``BestSet.level``). In the set: the same fields against its
    strongest rival when there is one (``p_value`` above the level). ``note``: one sentence."""

    index: int
    estimate: float
    low: float | None
    high: float | None
    in_set: bool
    beaten_by: int | None
    drop: float | None
    drop_low: float | None
    drop_high: float | None
    p_value: float | None
    note: str = ""
    rival: int | None = None
    general_low: float | None = None
    general_high: float | None = None


@dataclass(frozen=True)
class BestSet:
    """The confidence set for the best variant: P(the best is in it) >= 1 − alpha (for these
    cases, see the module). ``level``: the per-comparison level used; ``decided``: exactly one
    variant left; ``reason``: one or two sentences; ``dropped_cases``: case columns left out
    because a variant had no graded trial there."""

    variants: tuple[VariantFigure, ...]
    alpha: float
    level: float
    metric: str
    k: int
    method: str
    decided: bool
    reason: str
    dropped_cases: tuple[int, ...] = ()
    n_cases: int = 0

    def in_set_indices(self) -> tuple[int, ...]:
        """Indices of the variants in the set, ascending."""
        return tuple(v.index for v in self.variants if v.in_set)


def counts_checked(
    passed: np.ndarray | Sequence[Sequence[int]], graded: np.ndarray | Sequence[Sequence[int]]
) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """(passed, graded, dropped): int64 arrays (V, C') with every case whose ``graded`` is 0
    for some variant removed, and the removed case indices. Raises ``ValueError`` for a shape
    other than (V >= 2, C >= 1), non-integer or negative counts, passed > graded, or no case
    left."""
    x = np.asarray(passed)
    n = np.asarray(graded)
    if x.ndim != 2 or x.shape != n.shape:
        raise ValueError(f"passed and graded must be (variants, cases), got {x.shape}, {n.shape}")
    if x.shape[0] < 2:
        raise ValueError("an experiment needs at least 2 variants")
    if x.shape[1] < 1:
        raise ValueError("no cases")
    if x.dtype.kind not in "iu" or n.dtype.kind not in "iu":
        raise ValueError("passed and graded must be integer counts")
    x = x.astype(np.int64)
    n = n.astype(np.int64)
    if np.any(x < 0) or np.any(x > n):
        raise ValueError("need 0 <= passed <= graded in every cell")
    empty = np.any(n == 0, axis=0)
    dropped = tuple(int(i) for i in np.flatnonzero(empty))
    if empty.all():
        raise ValueError("every case has a variant with no graded trial: nothing to compare")
    return x[:, ~empty], n[:, ~empty], dropped


def best_set(
    passed: np.ndarray | Sequence[Sequence[int]],
    graded: np.ndarray | Sequence[Sequence[int]],
    *,
    alpha: float = 0.05,
    metric: str = "pass_rate",
    k: int = 1,
    level: float | None = None,
    names: Sequence[str] | None = None,
) -> BestSet:
    """The confidence set for the best variant (module docstring: the rule and sources).

    ``passed``, ``graded``: int arrays (V, C). ``alpha`` in (0, 1); ``metric`` "pass_rate" or
    "pass_hat_k" (then every kept cell needs ``graded >= k``); ``level``: the per-comparison
    level, default ``alpha / (V − 1)`` (racing passes its look's share); ``names``: how the
    sentences name the variants (default "variant i"). Cost: at most V(V − 1) exact tests
    (about half skip by symmetry): ~17 ms at V = 10, C = 30, 5 trials. Raises
    ``ValueError`` as ``counts_checked``, for an unknown metric, k < 1, a pass^k cell with
    fewer than k graded trials, or alpha/level outside (0, 1)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if metric not in METRICS:
        raise ValueError(f"metric: {metric!r} (pass_rate, pass_hat_k)")
    if not (isinstance(k, int) and k >= 1):
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    if metric == "pass_rate" and k != 1:
        raise ValueError("k is 1 for the pass rate")
    x, n, dropped = counts_checked(passed, graded)
    n_variants, n_cases = x.shape
    if metric == "pass_hat_k" and np.any(n < k):
        raise ValueError(f"pass^{k} needs at least {k} graded trials in every variant x case")
    level = alpha / (n_variants - 1) if level is None else level
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    label = variant_labeler(names, n_variants)
    per_case = _per_case(x, n, metric, k)
    estimates = per_case.mean(axis=1)
    intervals = [
        _estimate_interval(x[v], n[v], per_case[v], metric, k, alpha) for v in range(n_variants)
    ]
    p = _p_values(x, n, per_case, metric, k, level)
    confidence = max(1.0 - 2.0 * level, 0.5)
    figures = []
    for b in range(n_variants):
        rivals = [j for j in range(n_variants) if j != b]
        if np.all(np.isnan(p[rivals, b])):
            # Every test was skipped (p >= 1/2): show the one against the closest rival.
            leader = min(rivals, key=lambda r: (-estimates[r], r))
            p[leader, b] = _drop_p_value(x[leader], n[leader], x[b], n[b], metric, k)
        j = min(rivals, key=lambda r: (np.inf if np.isnan(p[r, b]) else p[r, b], -estimates[r], r))
        out = bool(p[j, b] <= level)
        drop, drop_low, drop_high, general_low, general_high = _drop_interval(
            x[j],
            n[j],
            x[b],
            n[b],
            per_case[j],
            per_case[b],
            metric,
            k,
            confidence,
            intervals[j],
            intervals[b],
        )
        note = _variant_note(
            label,
            b,
            j,
            out,
            drop,
            (drop_low, drop_high),
            (general_low, general_high),
            float(p[j, b]),
            level,
            n_cases,
        )
        figures.append(
            VariantFigure(
                index=b,
                estimate=float(estimates[b]),
                low=intervals[b][0],
                high=intervals[b][1],
                in_set=not out,
                beaten_by=j if out else None,
                drop=drop,
                drop_low=drop_low,
                drop_high=drop_high,
                p_value=float(p[j, b]),
                note=note,
                rival=j,
                general_low=general_low,
                general_high=general_high,
            )
        )
    kept = [f.index for f in figures if f.in_set]
    reason = _set_reason(label, kept, estimates, n_cases, n, dropped, level, metric, k)
    return BestSet(
        variants=tuple(figures),
        alpha=alpha,
        level=level,
        metric=metric,
        k=k,
        method=_method(metric, k),
        decided=len(kept) == 1,
        reason=reason,
        dropped_cases=dropped,
        n_cases=n_cases,
    )


def _p_values(
    x: np.ndarray, n: np.ndarray, per_case: np.ndarray, metric: str, k: int, level: float
) -> np.ndarray:
    """(V, V) one-sided p-values, ``p[j, b]`` of "b lower than j"; NaN where the test need not
    run: with equal trial counts per case each case's null law is symmetric about s/2 (and
    the pass^k statistic's about 0), so when b's statistic is at or above j's, p >= 1/2 >
    ``level``."""
    n_variants = x.shape[0]
    p = np.full((n_variants, n_variants), np.nan)
    sums = x.sum(axis=1) if metric == "pass_rate" else per_case.sum(axis=1)
    for j in range(n_variants):
        for b in range(n_variants):
            if j == b:
                continue
            symmetric = bool(np.array_equal(n[j], n[b]))
            if symmetric and level < 0.5 and sums[b] >= sums[j]:
                continue
            p[j, b] = _drop_p_value(x[j], n[j], x[b], n[b], metric, k)
    return p


def _method(metric: str, k: int) -> str:
    if metric == "pass_rate":
        return (
            "subset selection (Gupta 1965; Hsu 1996 ch. 4): out when a rival is better by the "
            "exact case-stratified test at alpha/(V-1) (Bonferroni)"
        )
    return (
        f"subset selection (Gupta 1965; Hsu 1996 ch. 4) on pass^{k}: out when a rival is better "
        "by a within-case permutation test at alpha/(V-1) (Bonferroni)"
    )


def variant_labeler(names: Sequence[str] | None, n_variants: int) -> Callable[[int], str]:
    """How sentences name variant i: ``names[i]``, else "variant i". Raises ``ValueError``
    when ``names`` is not one per variant."""
    if names is not None and len(names) != n_variants:
        raise ValueError(f"names: {len(names)} for {n_variants} variants")

    def label(i: int) -> str:
        return names[i] if names is not None else f"variant {i}"

    return label


def _per_case(x: np.ndarray, n: np.ndarray, metric: str, k: int) -> np.ndarray:
    """(V, C) per-case estimates: pass rate, or the unbiased pass^k C(c, k)/C(n, k)."""
    if metric == "pass_rate":
        return np.asarray(x / n, dtype=float)
    return np.asarray(comb(x, k) / comb(n, k), dtype=float)


def _estimate_interval(
    x: np.ndarray, n: np.ndarray, per_case: np.ndarray, metric: str, k: int, alpha: float
) -> tuple[float | None, float | None]:
    if metric == "pass_rate":
        ci = clustered_rate_interval(x, n, confidence=1.0 - alpha)
    else:
        ci = pass_hat_k_interval(x, n, k, confidence=1.0 - alpha)
    return ci.ci_low, ci.ci_high


def _drop_p_value(
    xj: np.ndarray, nj: np.ndarray, xb: np.ndarray, nb: np.ndarray, metric: str, k: int
) -> float:
    """One-sided p of "b lower than j" (module docstring)."""
    if metric == "pass_rate":
        return drop_p_value(xj, nj, xb, nb)
    return passk_drop_p_value(xj, nj, xb, nb, k)


def drop_p_value(
    base_passed: np.ndarray,
    base_graded: np.ndarray,
    head_passed: np.ndarray,
    head_graded: np.ndarray,
) -> float:
    """``stats.compare.stratified_drop_test``'s p-value, P(S <= s_obs) with S = Σ_c h_c,
    computed by groups: cases sharing (n_base, n_head, s) are i.i.d. under the null, so each
    group's law is its case law's power (``_iid_sum_pmf``) and the groups are convolved;
    ~10 groups for 5 trials whatever C. Arrays (C,), graded >= 1, not checked
    (tests/stats/test_best_set.py checks it against the case-by-case test)."""
    nb = np.asarray(base_graded, dtype=np.int64)
    nh = np.asarray(head_graded, dtype=np.int64)
    h = np.asarray(head_passed, dtype=np.int64)
    s = np.asarray(base_passed, dtype=np.int64) + h
    width = int(max(nb.max(), nh.max())) + 1
    keys, sizes = np.unique((nb * width + nh) * (2 * width) + s, return_counts=True)
    k_low = 0
    kernels = []
    for key, g in zip(keys.tolist(), sizes.tolist(), strict=True):
        s_g = key % (2 * width)
        n_b, n_h = divmod(key // (2 * width), width)
        k_lo, kernel = _group_pmf(n_b, n_h, s_g, g)
        k_low += g * k_lo
        if kernel.size > 1:
            kernels.append(kernel)
    dist = _convolve_all(kernels) if kernels else np.ones(1)
    p = float(min(1.0, np.cumsum(dist)[int(h.sum()) - k_low]))
    return max(p, float(np.finfo(float).tiny))


@lru_cache(maxsize=65_536)
def _group_pmf(n_base: int, n_head: int, s: int, g: int) -> tuple[int, np.ndarray]:
    """(k_lo, pmf) of the head passes of one case, and the pmf of the sum over ``g`` such
    cases (read-only: shared by the cache)."""
    k_lo, pmf = _pmf(n_base, n_head, s)
    kernel = _iid_sum_pmf(np.asarray(pmf), g) if len(pmf) > 1 else np.ones(1)
    kernel.setflags(write=False)
    return k_lo, kernel


def passk_drop_p_value(
    base_passed: np.ndarray,
    base_graded: np.ndarray,
    head_passed: np.ndarray,
    head_graded: np.ndarray,
    k: int,
    *,
    n_resamples: int = PASSK_RESAMPLES,
    seed: int = PASSK_SEED,
) -> float:
    """Within-case permutation p of "head's pass^k lower than base's": statistic
    T = Σ_c (pass^k_head,c − pass^k_base,c); under the null each case's s passes split
    hypergeometrically (head gets h of its n_h trials). Exact when T on the integer grid
    L·T (L the lcm of every C(n, k)) fits ``EXACT_GRID_LIMIT``: each case's law placed on
    the grid, convolved. Otherwise Monte Carlo, T redrawn case by case, p = (#{T* <= T_obs}
    + 1)/(m + 1) (Phipson & Smyth 2010, never 0). Arrays (C,), graded >= k, not checked."""
    nb = np.asarray(base_graded, dtype=np.int64)
    nh = np.asarray(head_graded, dtype=np.int64)
    h = np.asarray(head_passed, dtype=np.int64)
    s = np.asarray(base_passed, dtype=np.int64) + h
    # A case whose trials all agree contributes the same under every split: leave it out.
    varies = (s > 0) & (s < nb + nh)
    if not varies.any():
        return 1.0
    exact = _passk_exact_p(nb[varies], nh[varies], h[varies], s[varies], k)
    if exact is not None:
        return exact
    nb, nh, h, s = nb[varies, None], nh[varies, None], h[varies, None], s[varies, None]

    def statistic(head: np.ndarray) -> np.ndarray:
        values = np.asarray(comb(head, k) / comb(nh, k) - comb(s - head, k) / comb(nb, k))
        return np.asarray(values.sum(axis=0), dtype=float)

    observed = float(statistic(h)[0])
    rng = np.random.default_rng(seed)
    null = statistic(rng.hypergeometric(s, nb + nh - s, nh, size=(s.shape[0], n_resamples)))
    extreme = int(np.count_nonzero(null <= observed + 1e-9))
    return (extreme + 1) / (n_resamples + 1)


def _passk_exact_p(
    nb: np.ndarray, nh: np.ndarray, h: np.ndarray, s: np.ndarray, k: int
) -> float | None:
    """``passk_drop_p_value`` exactly on the integer grid, None when it does not fit."""
    scale = 1
    for n_side in set(nb.tolist()) | set(nh.tolist()):
        scale = math.lcm(scale, math.comb(n_side, k))
        if scale > EXACT_GRID_LIMIT:
            return None
    kernels = []
    offset = 0
    observed = 0
    span = 0
    for n_b, n_h, h_c, s_c in zip(nb.tolist(), nh.tolist(), h.tolist(), s.tolist(), strict=True):
        k_lo, pmf = _pmf(n_b, n_h, s_c)
        heads = range(k_lo, k_lo + len(pmf))
        unit_h, unit_b = scale // math.comb(n_h, k), scale // math.comb(n_b, k)
        values = [math.comb(x, k) * unit_h - math.comb(s_c - x, k) * unit_b for x in heads]
        low = min(values)
        kernel = np.zeros(max(values) - low + 1)
        for value, prob in zip(values, pmf, strict=True):
            kernel[value - low] += prob
        offset += low
        observed += math.comb(h_c, k) * unit_h - math.comb(s_c - h_c, k) * unit_b
        span += kernel.size - 1
        if span + 1 > EXACT_GRID_LIMIT:
            return None
        kernels.append(kernel)
    dist = _convolve_all(kernels)
    p = float(min(1.0, dist[: observed - offset + 1].sum()))
    return max(p, float(np.finfo(float).tiny))


def _drop_interval(
    xj: np.ndarray,
    nj: np.ndarray,
    xb: np.ndarray,
    nb: np.ndarray,
    per_j: np.ndarray,
    per_b: np.ndarray,
    metric: str,
    k: int,
    confidence: float,
    interval_j: tuple[float | None, float | None],
    interval_b: tuple[float | None, float | None],
) -> tuple[float, float | None, float | None, float | None, float | None]:
    """``(drop, low, high, general_low, general_high)``: estimate(j) − estimate(b); ``low``,
    ``high`` its interval for these cases, the question the exact test answers (the
    within-case MOVER for the pass rate, the MOVER of the two pass^k intervals for pass^k);
    ``general_*`` for cases like these in general: the clustered t interval over cases
    (Miller 2024, as ``stats.compare.clustered_paired_interval``) united with the first. One
    case: no interval."""
    d = per_j - per_b
    drop = float(d.mean())
    if d.size < 2:
        return drop, None, None, None, None
    se = float(d.std(ddof=1) / math.sqrt(d.size))
    t = float(stdtrit(d.size - 1, 0.5 + confidence / 2))
    if metric == "pass_rate":
        floor_low, floor_high = within_case_interval_from_counts(
            nb, xb, nj, xj, confidence=confidence
        )
    else:
        mj, mb = float(per_j.mean()), float(per_b.mean())
        ij = pass_hat_k_interval(xj, nj, k, confidence=confidence)
        ib = pass_hat_k_interval(xb, nb, k, confidence=confidence)
        fl, fh = difference_interval(mb, ib.ci_low, ib.ci_high, mj, ij.ci_low, ij.ci_high)
        floor_low = drop if fl is None else fl
        floor_high = drop if fh is None else fh
    return (
        drop,
        max(-1.0, floor_low),
        min(1.0, floor_high),
        max(-1.0, min(drop - t * se, floor_low)),
        min(1.0, max(drop + t * se, floor_high)),
    )


def _pct(value: float) -> str:
    return f"{100 * value:.1f} pt"


def _variant_note(
    label: Callable[[int], str],
    b: int,
    j: int,
    out: bool,
    drop: float,
    fixed: tuple[float | None, float | None],
    general: tuple[float | None, float | None],
    p: float,
    level: float,
    n_cases: int,
) -> str:
    """One sentence on variant ``b`` against rival ``j``: the gap on these cases with its
    interval and the test's p against ``level``; when out, the gap on cases like these in
    general too (cases a sample: wider, and may hold 0 while the test, on these cases,
    rejects)."""
    cases = f"on these {n_cases} case{'s' if n_cases != 1 else ''}"
    here = "" if None in fixed else f" [{_pct(fixed[0])}, {_pct(fixed[1])}]"  # type: ignore[arg-type]
    if out:
        general_text = (
            ""
            if None in general
            else f" On cases like these in general the gap is {_pct(general[0])} to "  # type: ignore[arg-type]
            f"{_pct(general[1])}."  # type: ignore[arg-type]
        )
        return (
            f"{label(b)} is out: {_pct(drop)} below {label(j)} {cases}{here}, "
            f"p = {p:.2g} <= {level:.2g}.{general_text}"
        )
    if drop > 0:
        return (
            f"{label(b)} stays in: {_pct(drop)} below {label(j)} {cases}{here}, not "
            f"significant (p = {p:.2g} > {level:.2g})."
        )
    return f"{label(b)} stays in: no rival is above it."


def _set_reason(
    label: Callable[[int], str],
    kept: list[int],
    estimates: np.ndarray,
    n_cases: int,
    n: np.ndarray,
    dropped: tuple[int, ...],
    level: float,
    metric: str,
    k: int,
) -> str:
    what = "pass rate" if metric == "pass_rate" else f"pass^{k}"
    trials = int(np.median(n))
    dropped_text = (
        f" {len(dropped)} case(s) where a variant had no graded trial were left out for every "
        "variant."
        if dropped
        else ""
    )
    if len(kept) == 1:
        return (
            f"{label(kept[0])} has the best {what}: every other variant is significantly lower "
            f"on these {n_cases} cases (each test at {level:.2g})." + dropped_text
        )
    ordered = sorted(kept, key=lambda i: (-estimates[i], i))
    names = ", ".join(label(i) for i in ordered)
    if len(kept) == len(estimates):
        head = f"No variant is significantly behind another on {n_cases} cases x ~{trials} trials"
    else:
        head = f"{len(kept)} variants stay in the best set ({names})"
    return (
        f"{head}: their gaps are within what chance gives. More trials on the cases where they "
        "differ (settle), or more cases, would separate them; a real tie never will." + dropped_text
    )
