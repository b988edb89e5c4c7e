"""Agreement between a judge and human labels (or between two raters).

Inputs are two equally long sequences of verdicts, paired by position. For the rates,
verdicts are booleans (True = pass); for kappa, any hashable categories. Missing or
errored verdicts must be filtered out (and counted) by the caller: a None here raises
ValueError, so an unknown is never silently read as a pass or a fail.

Undefined is explicit: kappa is None when expected agreement is 1 (one class in every
label); a rate is None when its denominator is 0. Each carries a ``reason``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from scipy.stats import norm

from stats.intervals import wilson_interval


@dataclass(frozen=True)
class KappaResult:
    """Cohen's kappa with its large-sample standard error and normal interval.

    ``kappa``/``se``/``ci_low``/``ci_high`` are None when undefined (``reason`` says why);
    ``agreement`` is the raw proportion of agreement p_o; ``expected`` is p_e; ``n`` pairs.
    """

    kappa: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    agreement: float | None
    expected: float | None
    n: int
    reason: str = ""


@dataclass(frozen=True)
class RateResult:
    """A conditional rate numerator/denominator with a Wilson interval; ``rate`` and the
    interval are None when the denominator is 0 (``reason`` says why)."""

    rate: float | None
    numerator: int
    denominator: int
    ci_low: float | None
    ci_high: float | None
    reason: str = ""


def _check_pairs(a: Sequence[object], b: Sequence[object]) -> None:
    if len(a) != len(b):
        raise ValueError(f"rater sequences differ in length: {len(a)} and {len(b)}")
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x is None or y is None:
            raise ValueError(f"position {i}: missing verdict (filter and count it first)")


def cohens_kappa(
    rater_a: Sequence[Hashable], rater_b: Sequence[Hashable], confidence: float = 0.95
) -> KappaResult:
    """Cohen's kappa κ = (p_o − p_e) / (1 − p_e) (Cohen 1960) with the large-sample
    standard error of Fleiss, Cohen & Everitt (1969), "Large sample standard errors of
    kappa and weighted kappa", Psychological Bulletin 72(5), eq. (13):

        var(κ) = [Σ_i p_ii (1 − (p_i. + p_.i)(1 − κ))² + (1 − κ)² Σ_{i≠j} p_ij (p_.i + p_j.)²
                  − (κ − p_e (1 − κ))²] / (n (1 − p_e)²)

    and a normal interval clipped to [−1, 1]. At perfect agreement (p_o = 1) that SE is 0,
    so the lower bound is the one the Wilson interval of p_o implies at the observed p_e,
    (p_o,low − p_e)/(1 − p_e): 30 of 30 agreements at p_e = 0.5 give [0.77, 1], never a
    zero-width interval. p_o and p_e are computed exactly (fractions),
    so 29 of 30 agreements with p_e = 29/30 give κ = 0.0 exactly.
    Undefined (None, with reason) when n = 0 or p_e = 1 (every label in one class).
    Raises ValueError for unequal lengths or a None verdict.
    """
    _check_pairs(rater_a, rater_b)
    n = len(rater_a)
    if n == 0:
        return KappaResult(None, None, None, None, None, None, 0, "no labeled pairs")
    joint = Counter(zip(rater_a, rater_b, strict=True))
    row = Counter(rater_a)
    col = Counter(rater_b)
    categories = sorted(set(row) | set(col), key=repr)
    p_o = Fraction(sum(joint[(c, c)] for c in categories), n)
    p_e = sum((Fraction(row[c], n) * Fraction(col[c], n) for c in categories), Fraction(0))
    if p_e == 1:
        return KappaResult(
            None,
            None,
            None,
            None,
            float(p_o),
            float(p_e),
            n,
            "undefined (only one class in the labels)",
        )
    kappa = (p_o - p_e) / (1 - p_e)
    k = float(kappa)
    pe = float(p_e)
    p = {key: value / n for key, value in joint.items()}
    pr = {c: row[c] / n for c in categories}
    pc = {c: col[c] / n for c in categories}
    diag = sum(p.get((c, c), 0.0) * (1 - (pr[c] + pc[c]) * (1 - k)) ** 2 for c in categories)
    off = sum(
        p.get((i, j), 0.0) * (pc[i] + pr[j]) ** 2 for i in categories for j in categories if i != j
    )
    var = (diag + (1 - k) ** 2 * off - (k - pe * (1 - k)) ** 2) / (n * (1 - pe) ** 2)
    se = math.sqrt(max(var, 0.0))
    z = float(norm.ppf(0.5 + confidence / 2))
    low, high = k - z * se, k + z * se
    if p_o == 1:
        # The large-sample SE is 0 at perfect agreement, which would claim a certainty that
        # n labels do not give: take the interval the Wilson interval of p_o implies at the
        # observed p_e instead.
        po_low, _ = wilson_interval(n, n, confidence)
        low = (po_low - pe) / (1 - pe)
    return KappaResult(k, se, max(-1.0, low), min(1.0, high), float(p_o), pe, n)


def _conditional_rate(
    judge: Sequence[bool],
    human: Sequence[bool],
    *,
    given_human: bool,
    judge_says: bool,
    empty_reason: str,
    confidence: float,
) -> RateResult:
    _check_pairs(judge, human)
    for i, (x, y) in enumerate(zip(judge, human, strict=True)):
        if not isinstance(x, bool) or not isinstance(y, bool):
            raise ValueError(f"position {i}: verdicts must be booleans (True = pass)")
    denominator = sum(1 for h in human if h is given_human)
    numerator = sum(
        1 for j, h in zip(judge, human, strict=True) if h is given_human and j is judge_says
    )
    if denominator == 0:
        return RateResult(None, 0, 0, None, None, empty_reason)
    low, high = wilson_interval(numerator, denominator, confidence=confidence)
    return RateResult(numerator / denominator, numerator, denominator, low, high)


def false_accept_rate(
    judge: Sequence[bool], human: Sequence[bool], confidence: float = 0.95
) -> RateResult:
    """False-accept rate P(judge pass | human fail), with a Wilson interval.

    None ("undefined (no human fails)") when no human label is a fail.
    """
    return _conditional_rate(
        judge,
        human,
        given_human=False,
        judge_says=True,
        empty_reason="undefined (no human fails)",
        confidence=confidence,
    )


def false_reject_rate(
    judge: Sequence[bool], human: Sequence[bool], confidence: float = 0.95
) -> RateResult:
    """False-reject rate P(judge fail | human pass), with a Wilson interval.

    None ("undefined (no human passes)") when no human label is a pass.
    """
    return _conditional_rate(
        judge,
        human,
        given_human=True,
        judge_says=False,
        empty_reason="undefined (no human passes)",
        confidence=confidence,
    )
