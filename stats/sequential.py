"""Top-up rounds: more trials for suspect cases, the false-alarm rate still <= alpha. Used by
the gate (``stats.gate``) and adaptive runs.

The design (group-sequential per case, with selective conditional tests):

1. **Looks and spending.** Look 0 compares the runs as they are (N trials per case a side);
   rounds 1..R add ``round_sizes[r-1]`` per side (head only when the base cannot be
   replayed) to active cases. Bonferroni over looks: look 0 gets ``alpha_first``, the rounds
   share the rest by ``(alpha − alpha_first) · t^rho``, t the share of top-up trials done
   (Lan & DeMets 1983, Biometrika 70:659–663; Kim & DeMets 1987; Jennison & Turnbull 2000,
   ch. 7). The plan is fixed before any outcome; without top-up look 0 gets all of alpha.
2. **Continuation, a rule of the case's own data.** Active at round r+1 iff active at r, a
   *suspect* at look r (head's cumulative rate strictly below base's), not *futile* (even
   all remaining base passes and head fails would leave the plain one-sided Fisher p at the
   cap above the remaining budget), and under the cap.
3. **Selective exact test.** Under the null every trial of the case is exchangeable; given
   its total passes T the probability of a path of cumulative counts is proportional to
   ``Π_q C(mb_q, ΔB_q) C(mh_q, ΔH_q)`` (the rate cancels). Restricted to the paths step 2
   keeps, the law of base passes B_r given T and the selection comes by dynamic
   programming over (B, H) (Armitage, McPherson & Rowe 1969, J. R. Statist. Soc. A
   132:235–244). ``p = P(B_r >= b_obs | T, selected)`` uses every trial and is exact given
   the selection (Fithian, Sun & Taylor 2014, arXiv:1410.2597, §3); Fisher's at look 0.
4. **Family per look.** Given totals and the active set the selective p-values are
   independent with known discrete laws: discrete Holm (``stats.discrete``) at
   ``case_share · alpha_r``, then the suite test (Σ B_r, the convolution of the laws) at
   alpha_r minus what the family spent. Capability suites: the suite test alone.
5. **Why the whole false-alarm rate is <= alpha.** Let R_r be "look r rejects" in the
   process that continues past a block (stopping only removes rejections). Given the active
   set and totals, P(R_r) <= alpha_r (step 4), so P(block) <= Σ_r alpha_r = alpha; per-case
   claims are controlled strongly the same way over true-null cases.

Testing only each round's fresh trials would also be valid but loses power (one case
1.0 → 0.5, one round of 15, at 0.005: 85% with every trial, 68% fresh only;
``stats/gate_simulations.md``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.stats import binom, hypergeom

from stats.compare import _convolve_all
from stats.discrete import _lower_tail, _validate


@dataclass(frozen=True)
class TopUpPlan:
    """A gate design, fixed before any outcome.

    ``alpha``: the whole budget; ``first_trials``: N; ``round_sizes``: trials per case a side
    per round (base too only when ``base_replayed``), default (N, 2N), cap 4N; ``()``: no
    top-up. ``alpha_first``: look 0's share when there are rounds, the rest spent as
    ``rest · t^rho`` (Kim & DeMets 1987; Jennison & Turnbull 2000, §7.2.1). ``case_share`` /
    ``round_case_share``: the part of a look's budget offered first to the case family (look
    0 / rounds). ``suite_kind``: "regression" or "capability". Defaults chosen by simulation
    (``stats/gate_simulations.md``)."""

    alpha: float = 0.05
    first_trials: int = 5
    round_sizes: tuple[int, ...] | None = None
    base_replayed: bool = True
    alpha_first: float = 0.025
    case_share: float = 0.5
    round_case_share: float = 0.8
    spending_rho: float = 1.5
    suite_kind: str = "regression"
    _sizes: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if self.first_trials < 1:
            raise ValueError("first_trials must be at least 1")
        if self.suite_kind not in ("regression", "capability"):
            raise ValueError(f"suite_kind: {self.suite_kind!r} (regression, capability)")
        sizes = (
            (self.first_trials, 2 * self.first_trials)
            if self.round_sizes is None
            else tuple(int(m) for m in self.round_sizes)
        )
        if any(m < 1 for m in sizes):
            raise ValueError("every round adds at least one trial")
        if sizes and not 0 < self.alpha_first < self.alpha:
            raise ValueError("alpha_first must be in (0, alpha) when there are rounds")
        if not (0 <= self.case_share <= 1 and 0 <= self.round_case_share <= 1):
            raise ValueError("case_share and round_case_share must be in [0, 1]")
        if self.spending_rho <= 0:
            raise ValueError("spending_rho must be positive")
        object.__setattr__(self, "_sizes", sizes)

    @property
    def sizes(self) -> tuple[int, ...]:
        """Trials per case a side added by rounds 1..R (empty: no top-up)."""
        return self._sizes

    @property
    def cap(self) -> int:
        """Trials per case a side at the end of the last round, the first N included."""
        return self.first_trials + sum(self._sizes)

    def spending(self) -> tuple[float, ...]:
        """alpha_r for looks 0..R; sums to alpha (up to rounding)."""
        if not self._sizes:
            return (self.alpha,)
        rest = self.alpha - self.alpha_first
        total = sum(self._sizes)
        done = np.cumsum(self._sizes) / total
        spent = rest * done**self.spending_rho
        return (self.alpha_first, *np.diff(spent, prepend=0.0).tolist())

    def share(self, look: int) -> float:
        """The part of look ``look``'s budget offered first to the per-case family."""
        return self.round_case_share if look > 0 else self.case_share

    def remaining_budget(self, look: int) -> float:
        """The budget of the rounds after ``look``: sum of alpha_r for r > look."""
        return float(sum(self.spending()[look + 1 :]))

    def remaining_trials(self, look: int) -> tuple[int, int]:
        """Planned (base, head) trials per case still to come after ``look``."""
        head = sum(self._sizes[look:])
        return (head if self.base_replayed else 0), head


def is_suspect(*, base_passed: int, base_graded: int, head_passed: int, head_graded: int) -> bool:
    """Head's pass rate strictly below base's: ``h/n_h < b/n_b`` (cross-multiplied, exact)."""
    return head_passed * base_graded < base_passed * head_graded


@lru_cache(maxsize=65_536)
def _best_case_p(nb: int, nh: int, b_final: int, h_final: int) -> float:
    """Plain one-sided Fisher p (no selection) of base b_final/nb vs head h_final/nh."""
    k_lo, cdf = _lower_tail(nb, nh, b_final + h_final)
    return cdf[h_final - k_lo]


def _region(nb: int, nh: int, look: int, plan: TopUpPlan) -> np.ndarray:
    """Boolean (nb + 1, nh + 1): states (b, h) after ``look`` that continue (step 2)."""
    if look >= len(plan.sizes):
        return np.zeros((nb + 1, nh + 1), dtype=bool)
    return _region_cached(nb, nh, look, plan)


@lru_cache(maxsize=16_384)
def _region_cached(nb: int, nh: int, look: int, plan: TopUpPlan) -> np.ndarray:
    more_b, more_h = plan.remaining_trials(look)
    budget = plan.remaining_budget(look)
    b = np.arange(nb + 1)[:, None]
    h = np.arange(nh + 1)[None, :]
    keep = h * nb < b * nh
    for bi, hi in zip(*np.nonzero(keep), strict=True):
        best = _best_case_p(nb + more_b, nh + more_h, int(bi) + more_b, int(hi))
        if best > budget:
            keep[bi, hi] = False
    keep.setflags(write=False)
    return keep


def _binomial_row(n: int) -> np.ndarray:
    return np.array([math.comb(n, k) for k in range(n + 1)], dtype=float)


def _convolve_axis(w: np.ndarray, row: np.ndarray, axis: int) -> np.ndarray:
    """Convolve every line of ``w`` along ``axis`` with ``row`` (new trials' binomials)."""
    if row.size == 1:
        return w
    shape = list(w.shape)
    shape[axis] += row.size - 1
    out = np.zeros(shape)
    n = w.shape[axis]
    for d, c in enumerate(row.tolist()):
        index = [slice(None), slice(None)]
        index[axis] = slice(d, d + n)
        out[tuple(index)] += c * w
    return out


@lru_cache(maxsize=16_384)
def _path_weights(
    base_graded: tuple[int, ...], head_graded: tuple[int, ...], plan: TopUpPlan
) -> np.ndarray:
    """W[b, h] ∝ null probability of cumulative passes (b, h), summed over the paths kept active
    (step 3): products of binomial coefficients, shape (Σ base_graded + 1, Σ head_graded + 1)."""
    w = np.outer(_binomial_row(base_graded[0]), _binomial_row(head_graded[0]))
    nb, nh = base_graded[0], head_graded[0]
    for look in range(1, len(base_graded)):
        w = w * _region(nb, nh, look - 1, plan)
        mb, mh = base_graded[look], head_graded[look]
        w = _convolve_axis(_convolve_axis(w, _binomial_row(mb), 0), _binomial_row(mh), 1)
        nb, nh = nb + mb, nh + mh
    w.setflags(write=False)
    return w


@lru_cache(maxsize=65_536)
def _base_law(
    base_graded: tuple[int, ...], head_graded: tuple[int, ...], total: int, plan: TopUpPlan
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """``(b_lo, law, tail, support)``: B's law given ``total`` and the selection, its upper tail
    ``P(B >= b_lo + i)`` and the attainable p-values (ascending, last 1). Cached, read-only."""
    w = _path_weights(base_graded, head_graded, plan)
    nb, nh = w.shape[0] - 1, w.shape[1] - 1
    b_lo, b_hi = max(0, total - nh), min(total, nb)
    bs = np.arange(b_lo, b_hi + 1)
    probs = w[bs, total - bs]
    mass = probs.sum()
    if mass <= 0:
        raise ValueError("these counts are impossible under the continuation rule")
    law = probs / mass
    tail = np.minimum(1.0, np.cumsum(law[::-1])[::-1])
    support = np.sort(tail[law > 0])
    support[-1] = 1.0
    for array in (law, tail, support):
        array.setflags(write=False)
    return b_lo, law, tail, support


@dataclass(frozen=True)
class CaseLooks:
    """One case's per-look counts (not cumulative): look 0, then one entry per round (base 0 when
    not replayed). Four tuples of equal length: graded and passed per side."""

    base_passed: tuple[int, ...]
    base_graded: tuple[int, ...]
    head_passed: tuple[int, ...]
    head_graded: tuple[int, ...]

    def __post_init__(self) -> None:
        n = len(self.base_passed)
        if not (n == len(self.base_graded) == len(self.head_passed) == len(self.head_graded)):
            raise ValueError("a case's four per-look tuples must have the same length")
        if n == 0:
            raise ValueError("a case needs look 0")
        for p, g in (
            *zip(self.base_passed, self.base_graded, strict=True),
            *zip(self.head_passed, self.head_graded, strict=True),
        ):
            if isinstance(p, bool) or isinstance(g, bool) or g < 0 or p < 0 or p > g:
                raise ValueError(f"need 0 <= passed <= graded per look, got {p} of {g}")
        if self.base_graded[0] < 1 or self.head_graded[0] < 1:
            raise ValueError("look 0 needs a graded trial on each side")

    @property
    def looks(self) -> int:
        return len(self.base_passed)

    def cumulative(self, look: int) -> tuple[int, int, int, int]:
        """(base passed, base graded, head passed, head graded) summed over looks 0..look."""
        s = slice(0, look + 1)
        return (
            sum(self.base_passed[s]),
            sum(self.base_graded[s]),
            sum(self.head_passed[s]),
            sum(self.head_graded[s]),
        )


def continues(case: CaseLooks, *, look: int, plan: TopUpPlan) -> bool:
    """Whether step 2 keeps ``case`` active into round look + 1."""
    b, nb, h, nh = case.cumulative(look)
    return bool(_region(nb, nh, look, plan)[b, h])


def was_active(case: CaseLooks, *, look: int, plan: TopUpPlan) -> bool:
    """Whether the rule kept ``case`` active at every look before ``look`` (False, never raises)."""
    return all(continues(case, look=q, plan=plan) for q in range(look))


@dataclass(frozen=True)
class SelectiveTest:
    """``p_value`` in (0, 1]; ``support`` ascending, last 1; ``b_lo`` and ``law`` of cumulative
    base passes (for the suite convolution); cumulative ``base``/``head``."""

    p_value: float
    support: np.ndarray
    b_lo: int
    law: np.ndarray
    base: tuple[int, int]
    head: tuple[int, int]


def selective_case_test(case: CaseLooks, *, look: int, plan: TopUpPlan) -> SelectiveTest:
    """The selective p-value of "head lower" over looks 0..``look`` (step 3). Raises
    ``ValueError`` when the case was not active at ``look``."""
    if look >= case.looks:
        raise ValueError(f"the case has no look {look}")
    if not was_active(case, look=look, plan=plan):
        raise ValueError("the case was not active at this look under the plan's rule")
    b, nb, h, nh = case.cumulative(look)
    b_lo, law, tail, support = _base_law(
        tuple(case.base_graded[: look + 1]), tuple(case.head_graded[: look + 1]), b + h, plan
    )
    return SelectiveTest(float(tail[b - b_lo]), support, b_lo, law, (b, nb), (h, nh))


@dataclass(frozen=True)
class SuiteTest:
    """The suite test over the active cases: ``statistic`` Σ cumulative base passes, ``p_value``
    P(Σ B >= observed), ``support``."""

    statistic: int
    p_value: float
    support: np.ndarray

    def size_at(self, level: float) -> float:
        """Exact probability of p <= ``level`` under the null given totals and selection."""
        i = int(np.searchsorted(self.support, level * (1 + 1e-12), side="right"))
        return float(self.support[i - 1]) if i else 0.0


def selective_suite_test(tests: Sequence[SelectiveTest]) -> SuiteTest:
    """Σ_j B_j by convolving the independent selective laws; at look 0 it is
    ``stats.compare.stratified_drop_test``."""

    if not tests:
        return SuiteTest(0, 1.0, np.array([1.0]))
    kernels = [t.law for t in tests if t.law.size > 1]
    low = sum(t.b_lo for t in tests)
    dist = _convolve_all(kernels) if kernels else np.ones(1)
    observed = sum(t.base[0] for t in tests)
    tail = np.minimum(1.0, np.cumsum(dist[::-1])[::-1])
    support = np.sort(tail[dist > 0])
    support[-1] = 1.0
    p = float(tail[observed - low])
    return SuiteTest(observed, max(p, np.finfo(float).tiny), support)


@dataclass(frozen=True)
class SettleEstimate:
    """``trials`` per side to settle a suspect case (None with ``reason`` past ``max_trials`` or
    when head is not worse); exact ``power``; ``level``; the observed ``base_rate`` and
    ``head_rate`` assumed."""

    trials: int | None
    power: float
    level: float
    base_rate: float
    head_rate: float
    reason: str = ""


@lru_cache(maxsize=1024)
def _fisher_reject(n: int, level: float) -> np.ndarray:
    """Boolean (n + 1, n + 1): the one-sided Fisher test with n a side rejects at ``level`` for
    (b, h). For each total the rejected h are those up to a threshold, found by vectorised
    bisection (~20x faster than every cell). Cached per (n, level), read-only."""

    threshold = level * (1 + 1e-12)
    totals = np.arange(2 * n + 1)
    # Invariant per total: cdf(below) <= threshold (or below = lowest h - 1), cdf(above) >
    # threshold (or above = highest h + 1).
    below = np.maximum(0, totals - n) - 1
    above = np.minimum(totals, n) + 1
    while True:
        open_ = np.flatnonzero(above - below > 1)
        if open_.size == 0:
            break
        mid = (below[open_] + above[open_]) // 2
        ok = hypergeom.cdf(mid, 2 * n, totals[open_], n) <= threshold
        below[open_] = np.where(ok, mid, below[open_])
        above[open_] = np.where(ok, above[open_], mid)
    b = np.arange(n + 1)[:, None]
    h = np.arange(n + 1)[None, :]
    reject: np.ndarray = h <= below[b + h]
    reject.setflags(write=False)
    return reject


def _fisher_power(n: int, p_base: float, p_head: float, level: float) -> float:
    """Σ_{b,h} Bin(b; n, p_base) Bin(h; n, p_head) 1[P(K <= h | b + h) <= level]."""

    b = np.arange(n + 1)[:, None]
    h = np.arange(n + 1)[None, :]
    reject = _fisher_reject(n, level)
    weights = binom.pmf(b, n, p_base) * binom.pmf(h, n, p_head)
    return float(np.sum(weights * reject))


@lru_cache(maxsize=4096)
def trials_to_settle(
    *,
    base_passed: int,
    base_graded: int,
    head_passed: int,
    head_graded: int,
    level: float,
    power: float = 0.8,
    max_trials: int = 400,
) -> SettleEstimate:
    """Trials per side a fresh comparison needs to detect the observed drop, observed rates taken
    as truth: the smallest n (doubling, then bisection; power is nearly monotone in n) with
    exact one-sided Fisher power >= ``power`` at ``level`` (Fleiss, Levin & Paik 2003,
    §4.4). An order of magnitude: observed rates are noisy. Raises ``ValueError`` for
    impossible counts, or a level or power outside (0, 1). Cached."""

    _validate(base_passed, base_graded, head_passed, head_graded)
    if not (0 < level < 1 and 0 < power < 1):
        raise ValueError("level and power must be in (0, 1)")
    pb, ph = base_passed / base_graded, head_passed / head_graded
    if ph >= pb:
        return SettleEstimate(None, 0.0, level, pb, ph, "head is not observed worse")
    lo, n = 0, 1
    while n <= max_trials and _fisher_power(n, pb, ph, level) < power:
        lo, n = n, 2 * n
    if n > max_trials:
        n = max_trials
        reached = _fisher_power(n, pb, ph, level)
        if reached < power:
            return SettleEstimate(
                None, reached, level, pb, ph, f"more than {max_trials} trials a side"
            )
    # Invariant: power(lo) < target (or lo = 0), power(n) >= target.
    while n - lo > 1:
        mid = (lo + n) // 2
        if _fisher_power(mid, pb, ph, level) >= power:
            n = mid
        else:
            lo = mid
    return SettleEstimate(n, _fisher_power(n, pb, ph, level), level, pb, ph)


@lru_cache(maxsize=4096)
def drop_missable(
    *, base_rate: float, trials: int, level: float, power: float = 0.8
) -> float | None:
    """The smallest drop from ``base_rate`` (step 0.01) an exact one-sided Fisher test of
    ``trials`` a side at ``level`` detects with ``power`` (Fleiss, Levin & Paik 2003, §4.4);
    None when not even a drop to 0 is. Raises ``ValueError`` for a rate outside [0, 1], no
    trials, or a level or power outside (0, 1)."""
    if not (0 <= base_rate <= 1 and trials >= 1 and 0 < level < 1 and 0 < power < 1):
        raise ValueError("base_rate in [0, 1], trials >= 1, level and power in (0, 1)")
    steps = int(round(base_rate * 100))
    for k in range(1, steps + 1):
        head_rate = max(0.0, base_rate - k / 100)
        if _fisher_power(trials, base_rate, head_rate, level) >= power:
            return base_rate - head_rate
    return None
