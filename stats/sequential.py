"""Top-up rounds: more trials for suspect cases, with the false-alarm rate still <= alpha.

Pure numpy (Python integers for binomial coefficients). Used by the gate (``stats.gate``)
and by adaptive runs (a first round of N trials per case, then more trials only where the
decision is uncertain).

The design (a group-sequential design per case, with selective conditional tests):

1. **Looks and spending.** Look 0 is the comparison of the runs as they are (N trials per
   case a side). Rounds 1..R add ``round_sizes[r-1]`` trials per side (head only when the
   base cannot be replayed) to every case still *active*. alpha is spent over looks with a
   union bound (Bonferroni over looks): look 0 gets ``alpha_first``, the rounds share the
   rest by the power-family spending function ``(alpha − alpha_first) · t^rho`` of the
   share t of the top-up trials done (Lan & DeMets 1983, Biometrika 70:659–663; Kim &
   DeMets 1987; Jennison & Turnbull 2000, *Group Sequential Methods*, ch. 7). The plan is
   fixed before any outcome is seen (and so is whether there will be rounds at all);
   without top-up look 0 gets all of alpha.
2. **Continuation is a rule of the case's own data.** A case is active at round r+1 iff it
   was active at round r (every case is active at look 0) and at look r it is a *suspect*
   (cumulative head pass rate strictly below the base's) and not *futile* (even if every
   remaining base trial passed and every remaining head trial failed, the plain one-sided
   Fisher p-value at the cap would exceed the budget of the remaining rounds), and the cap
   is not reached. Nothing about other cases, and no p-value threshold, enters the rule.
3. **Selective exact test.** Under the null (the case's pass rate is the same on both
   sides and in every round; trials independent) every trial of the case is exchangeable.
   Conditioning on the case's total passes T after round r, the probability of a path of
   cumulative counts (B_0, H_0), ..., (B_r, H_r) is proportional to
   ``Π_q C(mb_q, ΔB_q) C(mh_q, ΔH_q)`` — the rate cancels. Restricting to the paths that
   the rule of step 2 keeps active (the event that the case was selected), the law of the
   cumulative base passes B_r given T and the selection is computed exactly by dynamic
   programming over (B, H) (the recursion of Armitage, McPherson & Rowe 1969, J. R. Statist.
   Soc. A 132:235–244, applied to the conditional law). The p-value is
   ``P(B_r >= b_obs | T, selected)``: a high base share of the passes means head worse. It
   uses every trial of the case, original ones included, and is exactly valid *given the
   selection* (selective inference: Fithian, Sun & Taylor 2014, arXiv:1410.2597, §3).
   At look 0 nothing is selected and it is Fisher's exact test.
4. **Family over cases per look.** Given every active case's total T and the active set,
   the cases' selective p-values are independent with known discrete laws, so look r runs
   the discrete Holm procedure (``stats.discrete``) over the active cases at
   ``case_share · alpha_r`` and then the stratified suite test (the sum over active cases of
   B_r, whose law is the convolution of the cases' selective laws) at alpha_r minus the
   size the case family really spent (its discreteness leaves part of its share unused).
   Capability suites run the suite test alone at alpha_r.
5. **Why the whole false-alarm rate is <= alpha.** Let R_r be "look r rejects something" in
   the process where every active case continues even after a block (the real process
   stops at a block, which only removes rejections). Given the active set and totals, look
   r rejects with probability <= alpha_r (step 4: a union bound of exact conditional sizes);
   so P(block) <= Σ_r P(R_r) <= Σ_r alpha_r = alpha. Strong control of the per-case
   claims follows the same way with the sum restricted to true-null cases.

Why not only the fresh trials of each round (the other valid design): they are independent
of the selection, so a round's test is valid given the whole past, but throwing away the
first N trials costs power: one case 1.0 → 0.5 with one top-up round of 15 trials a side,
tested at 0.005, is caught 85% of the time with every trial and 68% with the fresh ones
only (design-time simulations, ``stats/gate_simulations.md``). With the base not
replayed, fresh head trials can only be compared with the base's original trials, which
also chose the suspects; the selective test conditions on that choice, so no bias is left
to control.
"""

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
    """A gate design, fixed before any outcome is seen.

    ``alpha``: the whole false-alarm budget; ``first_trials``: N, trials per case a side in
    the first look; ``round_sizes``: trials per case a side each top-up round adds (the base
    side only when ``base_replayed``), default (N, 2N) so that the cap is 4N counting the
    first N; ``()`` means no top-up (look 0 gets all of alpha). ``alpha_first``: look 0's
    share of alpha when there are rounds; the rest is spent over the rounds by the
    power-family spending function ``rest · t^rho`` (Kim & DeMets 1987; Jennison & Turnbull
    2000, §7.2.1), t the share of the top-up trials done, so later, larger looks get more
    (rho = 1.5 and (N, 2N): 0.0048 then 0.0202 of the 0.025 left). ``case_share`` /
    ``round_case_share``: the part of a look's budget offered first to the per-case family
    at look 0 / in rounds (regression suites; the suite test gets the rest plus what the
    family's discreteness left unspent). ``suite_kind``: "regression" or "capability"
    (capability suites run the suite test alone).

    The defaults were chosen by simulation (``stats/gate_simulations.md``): alpha_first 0.025,
    rounds (N, 2N), rho 1.5, shares 0.5 and 0.8.
    """

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
    """Boolean (nb + 1, nh + 1): which cumulative states (b, h) after ``look`` continue to
    round look + 1 (suspect, not futile, a round left). Step 2 of the module docstring."""
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
    """W[b, h] ∝ probability under the null of cumulative passes (b, h) after the last look
    given, summed over the paths the continuation rule kept active at every earlier look
    (step 3). Shape (Σ base_graded + 1, Σ head_graded + 1); the rate cancels once a total
    is fixed, so W holds the products of binomial coefficients only."""
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
    """``(b_lo, law, tail, support)``: the law of cumulative base passes B given the total
    ``total`` and the selection (normalised, over b_lo..b_lo + len − 1), its upper tail
    ``tail[i] = P(B >= b_lo + i)`` and the attainable p-values (ascending, last 1).
    Read-only arrays, cached per counts."""
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
    """One case's trials per look: look 0 = the runs as first compared, then one entry per
    top-up round (base counts 0 in rounds where the base was not replayed). Four tuples of
    the same length (the number of looks the case took part in), counts of graded trials and
    of passes among them, per look (not cumulative)."""

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
    """Whether the rule of step 2 keeps ``case`` active into round look + 1 (given it was
    active at ``look``)."""
    b, nb, h, nh = case.cumulative(look)
    return bool(_region(nb, nh, look, plan)[b, h])


def was_active(case: CaseLooks, *, look: int, plan: TopUpPlan) -> bool:
    """Whether the rule kept ``case`` active at every look before ``look``: the condition
    for its data at ``look`` to be tested (ValueError-free: False when it was not)."""
    return all(continues(case, look=q, plan=plan) for q in range(look))


@dataclass(frozen=True)
class SelectiveTest:
    """A case's selective test at one look. ``p_value`` in (0, 1]; ``support``: attainable
    p-values given the total and the selection, ascending, last 1; ``b_lo`` and ``law``:
    the conditional law of cumulative base passes (for the suite convolution); ``base`` /
    ``head``: cumulative (passed, graded)."""

    p_value: float
    support: np.ndarray
    b_lo: int
    law: np.ndarray
    base: tuple[int, int]
    head: tuple[int, int]


def selective_case_test(case: CaseLooks, *, look: int, plan: TopUpPlan) -> SelectiveTest:
    """The exact selective p-value of "head lower" for ``case`` using every trial of looks
    0..``look`` (step 3 of the module docstring); Fisher's exact test at look 0.
    Raises ValueError when the case was not active at ``look`` under the plan's rule."""
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
    """The stratified suite test at one look over the active cases: ``statistic`` = Σ of
    cumulative base passes, ``p_value`` = P(Σ B >= observed) under the selective null,
    ``support`` its attainable p-values (ascending, last 1)."""

    statistic: int
    p_value: float
    support: np.ndarray

    def size_at(self, level: float) -> float:
        """Exact probability of p <= ``level`` under the null given totals and selection."""
        i = int(np.searchsorted(self.support, level * (1 + 1e-12), side="right"))
        return float(self.support[i - 1]) if i else 0.0


def selective_suite_test(tests: Sequence[SelectiveTest]) -> SuiteTest:
    """Σ_j B_j over the cases' selective laws (independent given totals and selection):
    the exact law is their convolution; p = P(Σ B >= observed). At look 0 this is the
    stratified test of ``stats.compare.stratified_drop_test``."""

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
    """How many trials a fresh comparison needs to settle a suspect case.

    ``trials``: per side (base and head each), None when no number up to ``max_trials``
    reaches the power or when head is not observed worse (``reason`` says which);
    ``power``: the exact power at ``trials`` (or at ``max_trials``); ``level``: the
    one-sided level assumed; ``base_rate`` / ``head_rate``: the rates assumed (observed)."""

    trials: int | None
    power: float
    level: float
    base_rate: float
    head_rate: float
    reason: str = ""


@lru_cache(maxsize=1024)
def _fisher_reject(n: int, level: float) -> np.ndarray:
    """Boolean (n + 1, n + 1): the one-sided Fisher test, n trials a side, rejects at
    ``level`` for base b passes and head h passes (``P(K <= h | b + h) <= level``, K the
    head's share of the t = b + h passes, hypergeometric). Read-only, cached per (n, level):
    it depends on no rate.

    For a given total t the p-value grows with h, so the rejected h are those up to a
    threshold h*(t); a bisection per t (vectorised over t) finds it with about log2(n)
    evaluations of the hypergeometric CDF per total instead of one per (b, h) cell — the
    same matrix, ~20 times faster (the full matrix took ~0.1 s at n = 400 on an idle core)."""

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
    """Exact power of the one-sided Fisher test, n trials a side, at ``level``:
    Σ_{b,h} Bin(b; n, p_base) Bin(h; n, p_head) 1[P(K <= h | b + h) <= level]."""

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
    """Trials per side a fresh comparison of this case needs to detect the observed drop.

    For a suspect the gate could not top up (the runs cannot be replayed): take the observed
    rates ``p_b = b/n_b`` and ``p_h = h/n_h`` as the truth and find the smallest n (doubling,
    then bisection: the power of a discrete test is nearly but not exactly monotone in n, so
    a slightly smaller n may also do) whose exact one-sided Fisher test at ``level`` has
    power >= ``power`` (``_fisher_power``; e.g. Fleiss, Levin & Paik
    2003, *Statistical Methods for Rates and Proportions*, §4.4, for exact power).
    ``level``: what the case would be tested at, e.g. ``plan.round_case_share`` times the
    last round's alpha when it would be the only suspect (divide by the number of competing
    suspects for a Bonferroni view). The observed rates are noisy (5/5 says "1.0"), so read
    the answer as an order of magnitude. Raises ValueError for impossible counts or a level
    or power outside (0, 1). Pure, so cached per arguments (a simulated gate meets the same
    counts again and again).
    """

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
    """The smallest drop of a case's pass rate (0..1, from ``base_rate`` down) that an exact
    one-sided Fisher test of ``trials`` trials a side at ``level`` detects with at least
    ``power``; smaller drops may be missed. None when not even a drop to 0 is detected with
    that power. Scans the head rate down in steps of 0.01 (``_fisher_power``: exact power,
    Fleiss, Levin & Paik 2003, §4.4). Raises ValueError for a rate outside [0, 1], no trials,
    or a level or power outside (0, 1)."""
    if not (0 <= base_rate <= 1 and trials >= 1 and 0 < level < 1 and 0 < power < 1):
        raise ValueError("base_rate in [0, 1], trials >= 1, level and power in (0, 1)")
    steps = int(round(base_rate * 100))
    for k in range(1, steps + 1):
        head_rate = max(0.0, base_rate - k / 100)
        if _fisher_power(trials, base_rate, head_rate, level) >= power:
            return base_rate - head_rate
    return None
