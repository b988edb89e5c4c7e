"""Typed results of the calibration selectors: a ratio is a number or None with a reason,
never NaN; ``as_json()`` is what approvals store and ``calibration_report --json`` prints.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from stats.agreement import KappaResult, RateResult
from stats.calibration_plan import WeightedRate


def kappa_json(k: KappaResult) -> dict:
    """``{"kappa", "se", "ci_low", "ci_high", "agreement", "expected", "n", "reason"}``."""
    return asdict(k)


def rate_json(r: RateResult) -> dict:
    """``{"rate", "numerator", "denominator", "ci_low", "ci_high", "reason"}``."""
    return asdict(r)


@dataclass(frozen=True)
class Thresholds:
    """Trust thresholds (``labeling.trust_rule``); ``min_human_fails``: the fewest for which the
    FAR bound can be under ``max_far`` (``far_fails_needed``: 35 at 10%).
    """

    min_n: int
    min_kappa: float
    max_far: float
    min_human_fails: int | None = None
    confidence: float = 0.95
    min_position_consistency: float = 0.80


@dataclass(frozen=True)
class TrustCheck:
    """One condition of the trust rule: ``value`` (None: undefined) against ``threshold``
    with ``op`` ("<=" or ">="); ``ok`` whether it holds; ``label`` says which figure
    ("upper 95% bound of the false-accept rate (sample)")."""

    key: str
    label: str
    value: float | None
    op: str
    threshold: float
    ok: bool


@dataclass(frozen=True)
class ReferenceLabel:
    """The reference verdict on a trial; ``basis``: ``single``, ``agreement`` or
    ``adjudication`` (always wins); ``critique``: labels' critiques joined, or the reason.
    """

    trial_id: int
    verdict: str  # "pass" | "fail"
    critique: str
    basis: str
    n_labels: int


@dataclass(frozen=True)
class ReferenceLabels:
    """Reference verdicts by trial id; ``unresolved``: ids where humans disagree unadjudicated
    (left out of every calibration); ``unlabeled``: ids without a label.
    """

    by_trial: dict[int, ReferenceLabel]
    unresolved: list[int]
    unlabeled: list[int]


@dataclass(frozen=True)
class Confusion:
    """Judge verdict x human reference verdict counts on the n compared trials."""

    judge_pass_human_pass: int = 0
    judge_pass_human_fail: int = 0  # false accepts
    judge_fail_human_pass: int = 0  # false rejects
    judge_fail_human_fail: int = 0


@dataclass(frozen=True)
class Disagreement:
    """One trial where the judge and the human reference differ."""

    trial_id: int
    trial_uuid: str
    case_key: str
    human_verdict: str
    human_critique: str
    human_basis: str
    judge_verdict: str
    judge_reason: str


@dataclass(frozen=True)
class Calibration:
    """A judge version's agreement with human reference labels (``calibration_compute``).

    ``n``: trials with a reference label and an ok judge verdict, the only ones in the
    figures; the ``n_*`` others are left out and counted. ``kappa``: 95% interval by the
    Fleiss-Cohen-Everitt SE; ``far`` = P(judge pass | human fail), ``frr`` = P(judge fail |
    human pass), Wilson 95%; ``far_weighted``: weights 1/pi, Kish effective n
    (``stats.calibration_plan``), else None with ``weights_note``. Trust: ``labeling.trust_rule``.
    """

    judge_version_id: int
    judge_version_label: str
    calibration_set_id: int | None
    suite_name: str | None
    n: int
    n_judge_errors: int
    n_judge_missing: int
    n_not_judged: int
    n_unresolved: int
    n_unlabeled: int
    confusion: Confusion
    agreement: float | None
    agreement_numerator: int
    kappa: KappaResult
    far: RateResult
    frr: RateResult
    thresholds: Thresholds
    trust_ok: bool
    trust_reasons: list[str] = field(default_factory=list)
    trust_checks: list[TrustCheck] = field(default_factory=list)
    far_weighted: WeightedRate | None = None
    weights_note: str = ""
    warnings: list[str] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)
    n_development: int = 0
    n_development_total: int = 0

    @property
    def human_fails(self) -> int:
        """Human-fail trials among the n compared (the FAR's denominator)."""
        return self.confusion.judge_pass_human_fail + self.confusion.judge_fail_human_fail

    @property
    def held_out_needed(self) -> dict[str, int]:
        """More held-out labels the rule needs before it can hold: ``{"human_fails", "n"}``, 0 when
        enough.
        """
        th = self.thresholds
        return {
            "human_fails": max(0, (th.min_human_fails or 0) - self.human_fails),
            "n": max(0, th.min_n - self.n),
        }

    @property
    def tpr(self) -> tuple[int, int]:
        """True-positive rate as (judge pass & human pass, human pass)."""
        c = self.confusion
        return c.judge_pass_human_pass, c.judge_pass_human_pass + c.judge_fail_human_pass

    @property
    def tnr(self) -> tuple[int, int]:
        """True-negative rate as (judge fail & human fail, human fail)."""
        c = self.confusion
        return c.judge_fail_human_fail, c.judge_fail_human_fail + c.judge_pass_human_fail

    def as_json(self, *, with_disagreements: bool = False) -> dict:
        """Strict-JSON dict of the figures (None for undefined, never NaN)."""
        out = {
            "judge_version_id": self.judge_version_id,
            "judge_version": self.judge_version_label,
            "calibration_set_id": self.calibration_set_id,
            "suite": self.suite_name,
            "n": self.n,
            "n_judge_errors": self.n_judge_errors,
            "n_judge_missing": self.n_judge_missing,
            "n_not_judged": self.n_not_judged,
            "n_unresolved": self.n_unresolved,
            "n_unlabeled": self.n_unlabeled,
            "n_development": self.n_development,
            "n_development_total": self.n_development_total,
            "confusion": asdict(self.confusion),
            "agreement": self.agreement,
            "agreement_numerator": self.agreement_numerator,
            "kappa": kappa_json(self.kappa),
            "far": rate_json(self.far),
            "frr": rate_json(self.frr),
            "thresholds": asdict(self.thresholds),
            "trust_ok": self.trust_ok,
            "trust_reasons": list(self.trust_reasons),
            "trust_checks": [asdict(c) for c in self.trust_checks],
            "far_weighted": asdict(self.far_weighted) if self.far_weighted else None,
            "weights_note": self.weights_note,
            "warnings": list(self.warnings),
        }
        if with_disagreements:
            out["disagreements"] = [asdict(d) for d in self.disagreements]
        return out


@dataclass(frozen=True)
class ReviewerPairAgreement:
    """Agreement between two raters (names) over the trials both labeled."""

    rater_a: str
    rater_b: str
    n: int
    agreement: float | None
    kappa: KappaResult


@dataclass(frozen=True)
class HumanAgreement:
    """Agreement among humans, a judge's ceiling: pooled over rater pairs (k labels give
    k(k-1)/2) on trials with >= 2 labels; ``by_pair`` per pair of raters.
    """

    n_trials: int
    n_pairs: int
    agreement: float | None
    kappa: KappaResult
    by_pair: list[ReviewerPairAgreement]
    n_disagreeing: int
    n_adjudicated: int


@dataclass(frozen=True)
class PositionFigures:
    """One presentation order of a pairwise judge alone against human preferences."""

    position: str
    n: int
    n_errors: int
    agreement: float | None
    kappa: KappaResult


@dataclass(frozen=True)
class PairwiseCalibration:
    """A pairwise judge version against human A/B preferences on a suite's pairs.

    ``n``: order-consistent pairs (both orders answered, equal) with a preference, the base
    of ``agreement`` and ``kappa``; inconsistent pairs are ties, counted apart.
    ``position_consistency`` = consistent / (consistent + inconsistent), Wilson interval;
    ``first_slot_preference`` and the reviewers' ``human_first_slot``: share choosing the slot
    shown first. Trust: ``labeling.trust_rule.pairwise_trust_checks``.
    """

    judge_version_id: int
    judge_version_label: str
    suite_name: str | None
    n_pairs: int
    n: int
    n_inconsistent: int
    n_judge_errors: int
    n_unresolved: int
    agreement: float | None
    agreement_numerator: int
    kappa: KappaResult
    position_consistency: RateResult
    first_slot_preference: RateResult
    by_position: list[PositionFigures]
    agreement_rate: RateResult | None = None
    n_human_ties: int = 0
    thresholds: Thresholds | None = None
    trust_ok: bool = False
    trust_reasons: list[str] = field(default_factory=list)
    trust_checks: list[TrustCheck] = field(default_factory=list)
    human_first_slot: RateResult | None = None
    # The suite the figures were computed on (None: every pair the version judged): an
    # approval's scope. The name is shown; the uuid is what the recheck matches, since a suite
    # can be renamed.
    suite_uuid: str | None = None

    def as_json(self) -> dict:
        """Strict-JSON dict; ``kind`` ``"pairwise"`` tells which rule an approval's figures met."""
        out = asdict(self)
        out["kind"] = "pairwise"
        return out
