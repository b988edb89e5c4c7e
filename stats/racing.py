"""Racing: settling an experiment's best set with more trials, only where they can help.

A plan fixed before any outcome (``racing_plan``): look 0 is the experiment as run; rounds
1..R each add ``trials_per_round`` trials per case to every variant still in the set, on the
cases that can still separate them. Look r computes ``stats.best_set.best_set`` on the
cumulative counts of the variants still active, at the per-comparison level
``alphas[r] / (V − 1)`` (V the variants at the start, whatever is left), Σ alphas <= alpha.
A variant out at a look stays out: the final set is the intersection of the looks' sets.

Why P(the true best b is ever put out) <= alpha: b is out at look r only when some rival j,
active with b, rejects "b not lower than j" at ``alphas[r] / (V − 1)``. Two variants active
together have had the same trials, so coupled with a process giving every variant every
round's trials, each such rejection has probability <= its level; the union over the V − 1
rivals and R + 1 looks is Σ alphas <= alpha (exact with ``all_cases=True``). The default case
rule (``cases_to_sample``) is symmetric in the variants and reads a case's outcomes only
through "every active trial there agrees", so labels stay exchangeable under the least
favourable null; what it changes in the exact test's null law is measured
(``bench/bench_experiments.py``, profile ``equal90``). In full: docs/statistics.md
("Experiments: which variant to ship"). Alpha spent as the gate's top-up spends it
(``stats.sequential``): half at look 0, the rest split equally over the rounds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stats.best_set import BestSet, VariantFigure, best_set, counts_checked, variant_labeler
from stats.intervals import clustered_rate_interval
from stats.passk import pass_hat_k_interval


@dataclass(frozen=True)
class RacingPlan:
    """``alpha``: the whole budget; ``rounds`` R >= 0; ``trials_per_round``: trials added per
    case per active variant each round; ``alphas``: alpha spent at looks 0..R (sum <= alpha)."""

    alpha: float
    rounds: int
    trials_per_round: int
    alphas: tuple[float, ...]

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if self.rounds < 0 or self.trials_per_round < 1:
            raise ValueError("rounds must be >= 0 and trials_per_round >= 1")
        if len(self.alphas) != self.rounds + 1:
            raise ValueError(f"alphas: one per look, {self.rounds + 1}, got {len(self.alphas)}")
        if any(a <= 0 for a in self.alphas) or sum(self.alphas) > self.alpha * (1 + 1e-9):
            raise ValueError("alphas must be positive and sum to at most alpha")

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (floats, ints, a list)."""
        return {
            "alpha": self.alpha,
            "rounds": self.rounds,
            "trials_per_round": self.trials_per_round,
            "alphas": list(self.alphas),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RacingPlan:
        """The plan ``to_json`` wrote. Raises ``ValueError`` for a missing key or bad values."""
        try:
            return cls(
                alpha=float(d["alpha"]),
                rounds=int(d["rounds"]),
                trials_per_round=int(d["trials_per_round"]),
                alphas=tuple(float(a) for a in d["alphas"]),
            )
        except (KeyError, TypeError) as error:
            raise ValueError(f"not a racing plan: {error}") from error


def racing_plan(*, alpha: float = 0.05, rounds: int = 3, trials_per_round: int = 5) -> RacingPlan:
    """alpha/2 at look 0, alpha/(2R) at each of the R rounds (no rounds: alpha at look 0).
    Raises ``ValueError`` as ``RacingPlan``."""
    if rounds <= 0:
        return RacingPlan(alpha, max(rounds, 0), trials_per_round, (alpha,))
    rest = alpha / 2 / rounds
    return RacingPlan(alpha, rounds, trials_per_round, (alpha / 2, *([rest] * rounds)))


@dataclass(frozen=True)
class RaceLook:
    """One look. ``best``: the set over every variant (those out at an earlier look are out
    with ``note`` saying so); ``active``: variants still in; ``cases``: case indices to give
    ``plan.trials_per_round`` more trials per active variant next (empty when ``done``);
    ``reason``: one sentence."""

    look: int
    best: BestSet
    active: tuple[int, ...]
    cases: tuple[int, ...]
    done: bool
    reason: str


def cases_to_sample(
    passed: np.ndarray, graded: np.ndarray, active: Sequence[int]
) -> tuple[int, ...]:
    """Cases where the active variants' trials do not all agree (some pass and some fail,
    over every active variant's trials together), or where an active variant has no graded
    trial yet: the only cases where more trials can move a test between them. Arrays (V, C)."""
    rows = list(active)
    x, n = passed[rows], graded[rows]
    all_pass = np.all(x == n, axis=0) & np.all(n > 0, axis=0)
    all_fail = np.all(x == 0, axis=0) & np.all(n > 0, axis=0)
    return tuple(int(c) for c in np.flatnonzero(~(all_pass | all_fail)))


def race_look(
    plan: RacingPlan,
    look: int,
    passed: np.ndarray | Sequence[Sequence[int]],
    graded: np.ndarray | Sequence[Sequence[int]],
    *,
    active_before: tuple[int, ...] | None = None,
    metric: str = "pass_rate",
    k: int = 1,
    names: Sequence[str] | None = None,
    all_cases: bool = False,
) -> RaceLook:
    """Look ``look`` (0..R) of ``plan`` on cumulative counts (V, C) of every variant;
    ``active_before``: the variants still in after the previous look (None: all). Only
    active variants compete, at ``plan.alphas[look] / (V − 1)``. ``all_cases``: give the
    next round's trials on every case, not only where the active variants disagree (the
    guarantee then rests on the coupling argument alone, docs/statistics.md). Raises
    ``ValueError`` for a look outside 0..R, an empty or unknown ``active_before``, and as
    ``best_set``."""
    if not 0 <= look <= plan.rounds:
        raise ValueError(f"look must be in 0..{plan.rounds}, got {look}")
    x_all, n_all = np.asarray(passed), np.asarray(graded)
    counts_checked(x_all, n_all)  # shapes and ranges of every variant
    n_variants = x_all.shape[0]
    before = tuple(range(n_variants)) if active_before is None else tuple(sorted(active_before))
    if (
        not before
        or any(not 0 <= i < n_variants for i in before)
        or len(set(before)) != len(before)
    ):
        raise ValueError(f"active_before: distinct variant indices in 0..{n_variants - 1}")
    level = plan.alphas[look] / (n_variants - 1)
    label = variant_labeler(names, n_variants)
    if len(before) >= 2:
        sub = best_set(
            x_all[list(before)],
            n_all[list(before)],
            alpha=plan.alpha,
            metric=metric,
            k=k,
            level=level,
            names=[label(i) for i in before],
        )
        by_index = {before[f.index]: _renumbered(f, before) for f in sub.variants}
        dropped = tuple(c for c in range(x_all.shape[1]) if np.any(n_all[list(before), c] == 0))
    else:
        sub = None
        by_index = {}
        dropped = ()
    for i in range(n_variants):
        if i not in by_index:
            by_index[i] = _figure_alone(
                i, x_all[i], n_all[i], metric, k, plan.alpha, i in before, label
            )
    active = tuple(i for i in range(n_variants) if by_index[i].in_set)
    final = look == plan.rounds
    if len(active) < 2 or final:
        cases: tuple[int, ...] = ()
    elif all_cases:
        cases = tuple(range(x_all.shape[1]))
    else:
        cases = cases_to_sample(x_all, n_all, active)
    done = len(active) < 2 or final or not cases
    reason = _look_reason(label, look, plan, active, cases, done, sub)
    best = BestSet(
        variants=tuple(by_index[i] for i in range(n_variants)),
        alpha=plan.alpha,
        level=level,
        metric=metric,
        k=k,
        method=(sub.method if sub else "racing") + f"; racing look {look} of {plan.rounds}",
        decided=len(active) == 1,
        reason=reason if sub is None else sub.reason,
        dropped_cases=dropped,
        n_cases=sub.n_cases if sub else int(x_all.shape[1]),
    )
    return RaceLook(look, best, active, cases, done, reason)


def _renumbered(f: VariantFigure, before: tuple[int, ...]) -> VariantFigure:
    return VariantFigure(
        index=before[f.index],
        estimate=f.estimate,
        low=f.low,
        high=f.high,
        in_set=f.in_set,
        beaten_by=None if f.beaten_by is None else before[f.beaten_by],
        drop=f.drop,
        drop_low=f.drop_low,
        drop_high=f.drop_high,
        p_value=f.p_value,
        note=f.note,
        rival=None if f.rival is None else before[f.rival],
    )


def _figure_alone(
    i: int,
    x: np.ndarray,
    n: np.ndarray,
    metric: str,
    k: int,
    alpha: float,
    still_in: bool,
    label: Any,
) -> VariantFigure:
    """A variant outside this look's comparison: out at an earlier look, or the last one in."""
    graded = n > 0
    if metric == "pass_rate":
        ci = clustered_rate_interval(x[graded], n[graded], confidence=1 - alpha)
    else:
        ci = pass_hat_k_interval(x[graded], n[graded], k, confidence=1 - alpha)
    note = (
        f"{label(i)} is the only variant left in."
        if still_in
        else f"{label(i)} was put out at an earlier look."
    )
    return VariantFigure(
        index=i,
        estimate=float(ci.mean) if ci.mean is not None else 0.0,
        low=ci.ci_low,
        high=ci.ci_high,
        in_set=still_in,
        beaten_by=None,
        drop=None,
        drop_low=None,
        drop_high=None,
        p_value=None,
        note=note,
    )


def _look_reason(
    label: Any,
    look: int,
    plan: RacingPlan,
    active: tuple[int, ...],
    cases: tuple[int, ...],
    done: bool,
    sub: BestSet | None,
) -> str:
    names = ", ".join(label(i) for i in active)
    if len(active) == 1:
        return f"Look {look}: {names} is the only variant left in the best set."
    if not done:
        return (
            f"Look {look}: {len(active)} variants still in ({names}); next round adds "
            f"{plan.trials_per_round} trials to each on the {len(cases)} case(s) where they "
            "differ."
        )
    if look == plan.rounds:
        return (
            f"Look {look}, the last of the plan: {len(active)} variants stay in ({names}); "
            "no more rounds were planned."
        )
    return (
        f"Look {look}: {len(active)} variants stay in ({names}) and agree on every case "
        "(all pass or all fail): more trials cannot separate them."
    )
