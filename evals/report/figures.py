"""A grader's (or overall's) figures over a set of cases: trial counts, the pass rate as the
mean of per-case rates with its interval, pass@k and pass^k (``Figures``, ``figures_for``),
computed from per-case tallies with numpy; no queries."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from evals.grading.rungs import CorrectedPassRate
from evals.grading.verdict import CaseTally
from stats import pass_at_k, pass_hat_k, wilson_interval
from stats.intervals import (
    ClusteredMean,
    MeanInterval,
    clustered_mean_interval,
    clustered_rate_interval,
)
from stats.passk import pass_at_k_interval_from_estimates, pass_hat_k_interval_from_estimates


@lru_cache(maxsize=4096)
def _pass_k_pair(n: int, c: int, k: int) -> tuple[float, float]:
    return pass_at_k(n, c, k), pass_hat_k(n, c, k)


@lru_cache(maxsize=4096)
def case_wilson(passed: int, graded: int) -> tuple[float, float]:
    """Wilson 95% interval of one case's k of n (cached: few distinct pairs per run)."""
    return wilson_interval(passed, graded)


@dataclass(frozen=True)
class PassK:
    """pass@k and pass^k at one k: means of the unbiased per-case estimators over the ``n_cases``
    cases with at least k_max graded trials (``cases_left_out`` had fewer); ``*_low``/``*_high``:
    95% intervals clustered by case (``stats.passk``: Korn–Graubard on disjoint blocks of k
    trials), None when ``n_cases`` is 0."""

    k: int
    pass_at_k: float | None
    pass_hat_k: float | None
    n_cases: int
    cases_left_out: int
    pass_at_k_low: float | None = None
    pass_at_k_high: float | None = None
    pass_hat_k_low: float | None = None
    pass_hat_k_high: float | None = None


def pass_k_table(passed: np.ndarray, graded: np.ndarray, k_max: int) -> list[PassK]:
    """``PassK`` for k = 1..k_max over per-case (passed, graded) arrays, on one case set (at least
    ``k_max`` graded), so pass^k never rises with k and pass@k never falls
    (``C(c, k+1)/C(n, k+1) = C(c, k)/C(n, k) · (c−k)/(n−k)``). A table per k over the distinct
    (n, c) pairs keeps the cost flat in the case count."""
    table = []
    top = int(graded.max(initial=0))
    use = graded >= max(1, k_max)
    n_used = int(use.sum())
    for k in range(1, k_max + 1):
        if not n_used:
            table.append(PassK(k, None, None, 0, int(graded.size)))
            continue
        at = np.zeros((top + 1, top + 1))
        hat = np.zeros((top + 1, top + 1))
        for n in range(k, top + 1):
            for c in range(n + 1):
                at[n, c], hat[n, c] = _pass_k_pair(n, c, k)
        n_c, c_c = graded[use], passed[use]
        at_k = pass_at_k_interval_from_estimates(at[n_c, c_c], n_c, k)
        hat_k = pass_hat_k_interval_from_estimates(hat[n_c, c_c], n_c, k)
        table.append(
            PassK(
                k,
                at_k.mean,
                hat_k.mean,
                n_used,
                int(graded.size) - n_used,
                at_k.ci_low,
                at_k.ci_high,
                hat_k.ci_low,
                hat_k.ci_high,
            )
        )
    return table


@dataclass(frozen=True)
class Figures:
    """One grader's (or overall's) figures over a set of cases.

    Trials: ``trials_passed`` of ``trials_graded``; ``grades_errored``, ``not_graded``,
    ``pipeline_errored``, ``pending``, ``cancelled`` apart. ``pass_rate``: mean of per-case
    rates, 95% interval clustered by case (``stats.intervals.clustered_rate_interval``,
    Korn–Graubard); ``cases_ungraded``: cases without a graded trial. ``score_mean``: mean of
    per-case mean scores, ``score_interval`` its clustered 95% t interval or the reason there is
    none; ``scored``/``not_scored``/``no_score`` grade counts. ``corrected``: for a grader judged
    by one version, the Rogan–Gladen correction by its measured tpr and tnr
    (``evals.grading.rungs.CorrectedPassRate``); None for other graders, overall and slices."""

    key: str
    gating: bool | None
    trials_passed: int
    trials_graded: int
    grades_errored: int
    not_graded: int
    pipeline_errored: int
    pending: int
    pass_rate: ClusteredMean
    cases_ungraded: int
    pass_k: list[PassK]
    score_mean: float | None = None
    score_interval: MeanInterval | None = None
    scored: int = 0
    not_scored: int = 0
    no_score: int = 0
    cancelled: int = 0
    corrected: CorrectedPassRate | None = None

    @property
    def trials_failed(self) -> int:
        return self.trials_graded - self.trials_passed


def figures_for(
    key: str,
    gating: bool | None,
    tally: CaseTally,
    mask: np.ndarray,
    k_max: int,
    scores: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> Figures:
    """``Figures`` from a tally restricted to the cases in boolean ``mask``; ``scores`` is
    per-case (sum of scores, scored count, errored count, no-score count)."""
    passed, graded = tally.passed[mask], tally.graded[mask]
    has = graded > 0
    score_mean, score_interval, scored, not_scored, no_score = None, None, 0, 0, 0
    if scores is not None:
        sums, counts, missing, verdict_only = (a[mask] for a in scores)
        scored, not_scored = int(counts.sum()), int(missing.sum())
        no_score = int(verdict_only.sum())
        if scored:
            score_interval = clustered_mean_interval(sums[counts > 0] / counts[counts > 0])
            score_mean = score_interval.mean
    return Figures(
        key=key,
        gating=gating,
        trials_passed=int(passed.sum()),
        trials_graded=int(graded.sum()),
        grades_errored=int(tally.grade_errors[mask].sum()),
        not_graded=int(tally.not_graded[mask].sum()),
        pipeline_errored=int(tally.pipeline_errors[mask].sum()),
        pending=int(tally.pending[mask].sum()),
        cancelled=int(tally.cancelled[mask].sum()),
        pass_rate=clustered_rate_interval(passed[has], graded[has]),
        cases_ungraded=int((~has).sum()),
        pass_k=pass_k_table(passed, graded, k_max),
        score_mean=score_mean,
        score_interval=score_interval,
        scored=scored,
        not_scored=not_scored,
        no_score=no_score,
    )
