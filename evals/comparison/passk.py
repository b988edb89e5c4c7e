"""A comparison's pass@k and pass^k rows: per k, each side's figure over the shared cases with
its 95% interval clustered by case, and the difference with its interval."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from evals.comparison.headline import Headline
from evals.comparison.run_data import CaseData
from evals.report.figures import pass_k_table
from stats.passk import difference_interval


@dataclass(frozen=True)
class PassHatKDelta:
    """pass^k (Yao et al. 2024), or pass@k (Chen et al. 2021) in ``Comparison.pass_at_k``, at one k
    over shared cases: base, head and head − base (None where a side has no case with k graded
    trials), each side's 95% interval clustered by case, and the delta's 95% interval.
    ``delta_method``: ``"paired"`` at k = 1 when every shared case has verdicts on both sides
    (the headline's ``stats.compare.clustered_paired_interval``), else ``"mover"``
    (``stats.passk.difference_interval``: Newcombe 1998, Zou & Donner 2008; conservative when
    the runs share cases)."""

    k: int
    base: float | None
    head: float | None
    delta: float | None
    base_low: float | None = None
    base_high: float | None = None
    head_low: float | None = None
    head_high: float | None = None
    delta_low: float | None = None
    delta_high: float | None = None
    delta_method: str = "mover"
    # The cases each side's figure is over (every k of a table: the shared cases with at
    # least k_max graded trials on that side, ``evals.report.figures.pass_k_table``).
    base_cases: int | None = None
    head_cases: int | None = None


def _pass_k_delta(k: int, base: tuple, head: tuple) -> PassHatKDelta:
    """One k's base, head and head − base as (mean, low, high); ``difference_interval``."""
    low, high = difference_interval(*base, *head)
    return PassHatKDelta(
        k,
        base[0],
        head[0],
        None if head[0] is None or base[0] is None else head[0] - base[0],
        base[1],
        base[2],
        head[1],
        head[2],
        low,
        high,
    )


def pass_1_paired(rows: list[PassHatKDelta], headline: Headline) -> list[PassHatKDelta]:
    """``rows`` with k = 1's delta and interval from ``headline``: on the same cases pass@1 is the
    headline's mean of per-case differences, one quantity with one interval. The caller checks
    the cases are the same."""
    if not rows or rows[0].k != 1 or rows[0].delta is None:
        return rows
    first = replace(
        rows[0],
        delta=headline.delta,
        delta_low=headline.clustered.low,
        delta_high=headline.clustered.high,
        delta_method="paired",
    )
    return [first, *rows[1:]]


def pass_k_rows(
    pairs: list[tuple[CaseData, CaseData]], k_max: int
) -> tuple[list[PassHatKDelta], list[PassHatKDelta]]:
    """(pass@k deltas, pass^k deltas) for k = 1..k_max over the shared cases."""
    at: list[PassHatKDelta] = []
    out: list[PassHatKDelta] = []
    if not pairs or k_max < 1:
        return at, out
    sides = []
    for side in (0, 1):
        passed = np.array([p[side].passed for p in pairs], dtype=np.int64)
        graded = np.array([p[side].graded for p in pairs], dtype=np.int64)
        sides.append(pass_k_table(passed, graded, k_max))
    for b, h in zip(*sides, strict=True):
        cases = {"base_cases": b.n_cases, "head_cases": h.n_cases}
        at.append(
            replace(
                _pass_k_delta(
                    b.k,
                    (b.pass_at_k, b.pass_at_k_low, b.pass_at_k_high),
                    (h.pass_at_k, h.pass_at_k_low, h.pass_at_k_high),
                ),
                **cases,
            )
        )
        out.append(
            replace(
                _pass_k_delta(
                    b.k,
                    (b.pass_hat_k, b.pass_hat_k_low, b.pass_hat_k_high),
                    (h.pass_hat_k, h.pass_hat_k_low, h.pass_hat_k_high),
                ),
                **cases,
            )
        )
    return at, out
