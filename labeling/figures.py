"""Typed results of the calibration selectors (plain dataclasses, strict-JSON ready).

Every ratio is either a number or None with a reason (see ``stats.agreement``); nothing
here is ever NaN. ``as_json()`` gives the strict-JSON form stored in
``JudgeApproval.figures`` and printed by ``manage.py calibration_report --json``.
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
    """Trust thresholds (settings ``ASSAY["TRUST"]``, overridden per suite by
    ``Suite.trust_thresholds``): n >= min_n; the lower 95% bound of kappa >= min_kappa; the
    upper 95% bound of the false-accept rate <= max_far; and at least ``min_human_fails``
    human fails, the fewest for which that bound can be under max_far at all
    (``stats.calibration_plan.far_fails_needed``: 35 at 10%). Pairwise judges: the lower
    95% bound of position consistency >= ``min_position_consistency``
    (``labeling.trust_rule``)."""

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
    """The human reference verdict on one trial.

    ``basis``: ``single`` (one label), ``agreement`` (several labels, all the same) or
    ``adjudication`` (a lead's decision; always wins). ``critique`` joins the labels'
    critiques (or is the adjudication's reason). ``n_labels`` current labels on the trial.
    """

    trial_id: int
    verdict: str  # "pass" | "fail"
    critique: str
    basis: str
    n_labels: int


@dataclass(frozen=True)
class ReferenceLabels:
    """Reference verdicts by trial id; ``unresolved`` trial ids where humans disagree and no
    lead has adjudicated (left out of every calibration, counted); ``unlabeled`` ids with
    no label at all."""

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
    """A judge version's agreement with human reference labels.

    Scope: a calibration set's trials, or every labeled trial (of ``suite``, or of every
    suite) the judge has a grade on. Counts (trials):
    - ``n``: trials with both a reference label and an ok judge verdict (the only ones in
      the figures); ``n_judge_errors``: errored judge grades (``passed`` null),
      ``n_not_judged``: rungs the ladder skipped (``Grade.Status.NOT_JUDGED``) and
      ``n_judge_missing``: no judge grade (set scope only) — all left out of n;
    - ``n_unresolved``: humans disagree, no adjudication; ``n_unlabeled``: set trials with
      no label yet.
    - ``n_development``: labeled trials left out because the version was built from their
      labels (``judges.models.DevelopmentLabel``, its few-shot examples): its figures and
      its trust use held-out labels only; ``n_development_total``: all of the version's
      development trials, every one held out of this computation (``trust_grant`` checks it).
    Figures: ``agreement`` = agreeing / n (None when n = 0); ``kappa`` Cohen's kappa with
    its 95% interval (Fleiss–Cohen–Everitt SE); ``far`` = P(judge pass | human fail) and
    ``frr`` = P(judge fail | human pass), with Wilson 95% intervals: the sample figures.
    ``far_weighted``: the population estimate of the FAR when every item of a calibration
    set carries its inclusion probability (weights 1/pi, Kish effective n; see
    ``stats.calibration_plan``), else None with ``weights_note`` saying why.
    The trust rule is on the bounds, not the points (``trust_checks``, one per condition):
    n >= min_n, human fails >= min_human_fails, the upper bound of the sample FAR (and of the
    weighted FAR, when there is one) <= max_far, the lower bound of kappa >= min_kappa.
    ``trust_ok`` is True only when all hold; ``trust_reasons`` says which do not.
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
        """More held-out labels the trust rule needs before it can hold at all:
        ``{"human_fails": ..., "n": ...}`` (0 when enough), from the rule's
        ``min_human_fails`` (``stats.calibration_plan.far_fails_needed``) and ``min_n``."""
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
    """Agreement among humans, the ceiling a judge can be held to.

    ``n_trials``: trials with >= 2 current labels; ``n_pairs``: rater pairs over those trials
    (a trial with k labels gives k(k-1)/2 pairs); ``agreement`` and ``kappa`` pooled over all
    pairs (raters ordered by name within a pair); ``by_pair`` per pair of raters;
    ``n_disagreeing`` trials with differing labels, ``n_adjudicated`` of them decided by a lead.
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
    """A pairwise judge version against human preferences (A/B) on a suite's pairs.

    A pair's judge verdict counts only when both presentation orders answered and agree
    after mapping back to the original naming (order-consistent); ``n`` such pairs with a
    human preference enter ``agreement``/``kappa``. Counted apart: ``n_inconsistent`` (the
    two orders disagree: a tie, never a vote), ``n_judge_errors`` (an order errored or
    missing), ``n_unresolved`` (humans disagree). ``position_consistency`` = consistent /
    (consistent + inconsistent) with a Wilson interval; ``first_slot_preference`` = share of
    answered presentations choosing the slot shown first (A when original, B when swapped).
    ``by_position``: each order alone, as in the data folders' READMEs.
    ``agreement_rate``: ``agreement`` as a rate (agreeing / ``n``) with its Wilson interval.
    ``n_human_ties``: order-consistent pairs the humans labeled a tie (no reference).
    ``human_first_slot``: the reviewers' own position bias, the share of their A/B
    preferences (ties left out; imported ones, whose order is unknown, too) that chose the
    response shown as A, read through each label's recorded order (``shown_swapped``).
    ``trust_checks``/``trust_ok``/``trust_reasons``: the pairwise trust rule on
    ``thresholds`` (``labeling.trust_rule.pairwise_trust_checks``).
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

    def as_json(self) -> dict:
        """Strict-JSON dict (None for undefined); ``kind`` is ``"pairwise"`` so an approval
        records which rule its figures were judged by."""
        out = asdict(self)
        out["kind"] = "pairwise"
        return out
