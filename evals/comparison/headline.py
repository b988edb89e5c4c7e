"""The comparison's headline over the shared cases graded on both sides: mean base and head
pass rates, the delta, the stratified permutation p (which decides), the within-case
interval (the size of the effect on these cases) and the clustered interval (the "in
general" question), with the sentence that reads them in plain words."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evals.comparison.pvalue import pvalue_format, pvalue_phrase
from evals.comparison.run_data import CaseData, verdict_lists
from stats.compare import (
    Interval,
    clustered_paired_interval,
    stratified_permutation_test,
    within_case_interval,
)

EXACT_CASE_LIMIT = 500


@dataclass(frozen=True)
class Headline:
    """The answer over ``n_cases`` shared cases: mean per-case pass rates, ``delta`` = head − base;
    ``p_value`` of the two-sided stratified permutation test (``p_exact``, else Monte Carlo over
    ``n_resamples``); ``bootstrap_low/high`` (API names): the within-case interval (MOVER of
    Clopper–Pearson limits with Agresti–Caffo, ``stats.compare.within_case_interval``);
    ``clustered``: the "in general" interval (Miller 2024); ``sentence``; ``disagreement``:
    non-empty when p and the interval tell different stories."""

    n_cases: int
    base_rate: float
    head_rate: float
    delta: float
    p_value: float
    p_exact: bool
    n_resamples: int
    bootstrap_low: float
    bootstrap_high: float
    confidence: float
    clustered: Interval
    significant: bool
    sentence: str
    disagreement: str = ""

    @property
    def p_text(self) -> str:
        return pvalue_format(self.p_value, 1 - self.confidence)


def _points(delta: float) -> str:
    text = f"{abs(delta) * 100:.1f}".removesuffix(".0")
    return f"{text} point{'' if text == '1' else 's'}"


def headline_compute(
    pairs: list[tuple[CaseData, CaseData]], *, alpha: float, n_resamples: int, seed: int
) -> Headline | None:
    """The headline over ``pairs`` graded on both sides, None when none. ``alpha``: the two-sided
    level; ``n_resamples``/``seed``: Monte Carlo past ``EXACT_CASE_LIMIT`` cases."""
    graded = [(b, h) for b, h in pairs if b.graded and h.graded]
    if not graded:
        return None
    base_v = verdict_lists(b for b, _ in graded)
    head_v = verdict_lists(h for _, h in graded)
    # Exact enumeration convolves one kernel per case (~1 s at 2,000 cases); above
    # EXACT_CASE_LIMIT cases the grouped Monte Carlo (~0.2 s, p = (b+1)/(m+1)) is used.
    method = "auto" if len(graded) <= EXACT_CASE_LIMIT else "monte-carlo"
    test = stratified_permutation_test(
        base_v, head_v, n_resamples=n_resamples, seed=seed, method=method
    )
    confidence = 1 - alpha
    low, high = within_case_interval(base_v, head_v, confidence=confidence)
    clustered = clustered_paired_interval(base_v, head_v, confidence=confidence)
    base_rate = float(np.mean([b.passed / b.graded for b, _ in graded]))
    head_rate = float(np.mean([h.passed / h.graded for _, h in graded]))
    delta = test.delta
    p_text = pvalue_format(test.p_value, alpha)
    significant = test.p_value < alpha
    if abs(delta) < 1e-12:
        size = "head and base have the same pass rate"
    else:
        size = f"head is {_points(delta)} {'higher' if delta > 0 else 'lower'}"
    if significant:
        sentence = (
            f"{size}; this is larger than the pipeline's own randomness, {pvalue_phrase(p_text)}"
        )
    else:
        sentence = f"{size}; this is within the pipeline's own randomness ({pvalue_phrase(p_text)})"
    ci_has_zero = low <= 0 <= high
    disagreement = ""
    if significant == ci_has_zero:
        ci = f"[{low * 100:+.1f}, {high * 100:+.1f}] points"
        disagreement = (
            f"the permutation test ({pvalue_phrase(p_text)}) and the {confidence:.0%} "
            f"interval on this suite "
            f"{ci} disagree near the boundary: the interval "
            f"{'contains' if ci_has_zero else 'excludes'} 0"
        )
    return Headline(
        n_cases=len(graded),
        base_rate=base_rate,
        head_rate=head_rate,
        delta=delta,
        p_value=test.p_value,
        p_exact=test.exact,
        n_resamples=test.n_resamples,
        bootstrap_low=low,
        bootstrap_high=high,
        confidence=confidence,
        clustered=clustered,
        significant=significant,
        sentence=sentence,
        disagreement=disagreement,
    )
