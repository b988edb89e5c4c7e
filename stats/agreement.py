"""Agreement between a judge and human labels (or two raters), verdicts paired by position:
booleans (True = pass) for the rates, any hashable category for kappa. The caller filters
out missing verdicts (a None raises ``ValueError``). Undefined results are None with a
``reason``."""

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
    """Cohen's kappa with its large-sample SE and normal interval; ``agreement`` p_o,
    ``expected`` p_e, ``n`` pairs. None where undefined (``reason``)."""

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
    """numerator/denominator with a Wilson interval; None when the denominator is 0 (``reason``)."""

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
    """Cohen's kappa κ = (p_o − p_e) / (1 − p_e) (Cohen 1960) with the large-sample SE of Fleiss,
    Cohen & Everitt (1969), Psychological Bulletin 72(5), eq. (13):

        var(κ) = [Σ_i p_ii (1 − (p_i. + p_.i)(1 − κ))² + (1 − κ)² Σ_{i≠j} p_ij (p_.i + p_j.)²
                  − (κ − p_e (1 − κ))²] / (n (1 − p_e)²)

    and a normal interval clipped to [−1, 1]. At p_o = 1 (SE 0) the lower bound is
    (Wilson low of p_o − p_e)/(1 − p_e), never a zero-width interval. p_o and p_e are exact
    fractions. None when n = 0 or p_e = 1. Raises ``ValueError`` for unequal lengths or a None."""
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
    """P(judge pass | human fail) with a Wilson interval; None when no human fail."""
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
    """P(judge fail | human pass) with a Wilson interval; None when no human pass."""
    return _conditional_rate(
        judge,
        human,
        given_human=True,
        judge_says=False,
        empty_reason="undefined (no human passes)",
        confidence=confidence,
    )
