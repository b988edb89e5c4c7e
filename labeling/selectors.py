"""Reads for labeling and calibration: reference labels, calibration figures, human
agreement, trust state. Pairwise: ``labeling.pairwise``. Results: ``labeling.figures``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import combinations

from django.conf import settings
from django.db.models import Q
from django.db.models.functions import Length, Substr

from evals.blindness import labels_visible_to
from evals.models import Grade, Trial
from judges.models import JudgeVersion
from judges.models.development import development_trial_ids
from labeling.figures import (
    Calibration,
    Confusion,
    Disagreement,
    HumanAgreement,
    ReferenceLabel,
    ReferenceLabels,
    ReviewerPairAgreement,
    Thresholds,
)
from labeling.freeze import RevisionsAfterReveal, revisions_after_reveal
from labeling.guidelines import label_guidelines_counts
from labeling.models import Adjudication, CalibrationItem, CalibrationSet, Label, LabelRevision
from labeling.pairwise import pairwise_calibration_compute, pairwise_calibration_judge_versions
from labeling.trust_rule import trust_checks, trust_reasons, trust_thresholds
from stats.agreement import cohens_kappa, false_accept_rate, false_reject_rate
from stats.calibration_plan import WeightedRate, weighted_far

__all__ = [
    "calibration_compute",
    "calibration_judge_versions",
    "human_agreement",
    "label_current_get",
    "pairwise_calibration_compute",
    "pairwise_calibration_judge_versions",
    "reference_labels",
    "trust_checks",
    "trust_thresholds",
]

MIN_CLASS = 5


# The trial's large columns: a save needs only its identity.
_TRIAL_LARGE = ("output", "raw_response", "request", "trajectory", "final_state")


def calibration_item_get(*, set_id, trial_uuid) -> CalibrationItem | None:
    """The item of trial ``trial_uuid`` in set ``set_id`` (UUIDs) with its set (as the set's
    pages load it) and its trial (no large columns), in one query; None when absent.
    """
    return (
        CalibrationItem.objects.select_related(
            "calibration_set__suite",
            "calibration_set__run",
            "calibration_set__judge_version__judge",
            "trial",
        )
        .defer(*(f"trial__{name}" for name in _TRIAL_LARGE))
        .filter(calibration_set__uuid=set_id, trial__uuid=trial_uuid)
        .first()
    )


def label_current_get(*, trial: Trial, reviewer) -> Label | None:
    """The reviewer's current label on the trial, or None (a reviewer sees only their own)."""
    return Label.objects.filter(trial=trial, reviewer=reviewer).first()


def label_version_get(*, trial_id: int, reviewer) -> int:
    """The version of ``reviewer``'s label history on the trial (a clearing included; 0: never
    labeled): what a form sends back as ``expected_version``.
    """
    newest = (
        LabelRevision.objects.filter(trial_id=trial_id, reviewer=reviewer)
        .order_by("-version")
        .values_list("version", flat=True)
        .first()
    )
    return newest or 0


def _rater(label: Label) -> str:
    return f"user:{label.reviewer_id}" if label.reviewer_id else f"name:{label.reviewer_name}"


def _rater_name(label: Label) -> str:
    return label.reviewer.username if label.reviewer is not None else label.reviewer_name


def reference_labels(*, trial_ids: Iterable[int]) -> ReferenceLabels:
    """Per trial the human reference: the newest adjudication, else one label or several
    agreeing ones; disagreeing labels are ``unresolved``. Queries: 2.
    """
    ids = sorted(set(trial_ids))
    labels: dict[int, list[Label]] = defaultdict(list)
    for label in (
        Label.objects.filter(trial_id__in=ids)
        .select_related("reviewer")
        .order_by("trial_id", "created_at", "id")
    ):
        labels[label.trial_id].append(label)
    adjudicated: dict[int, Adjudication] = {}
    for adj in Adjudication.objects.filter(trial_id__in=ids).order_by("trial_id", "version"):
        adjudicated[adj.trial_id] = adj  # the newest wins
    by_trial: dict[int, ReferenceLabel] = {}
    unresolved: list[int] = []
    unlabeled: list[int] = []
    for tid in ids:
        found = labels.get(tid, [])
        if tid in adjudicated:
            adj = adjudicated[tid]
            by_trial[tid] = ReferenceLabel(tid, adj.verdict, adj.reason, "adjudication", len(found))
        elif not found:
            unlabeled.append(tid)
        elif len({lab.verdict for lab in found}) > 1:
            unresolved.append(tid)
        else:
            critiques = [lab.critique for lab in found if lab.critique]
            if len(found) == 1:
                critique = critiques[0] if critiques else ""
            else:
                critique = "\n".join(
                    f"{_rater_name(lab)}: {lab.critique}" for lab in found if lab.critique
                )
            by_trial[tid] = ReferenceLabel(
                tid,
                found[0].verdict,
                critique,
                "single" if len(found) == 1 else "agreement",
                len(found),
            )
    return ReferenceLabels(by_trial, unresolved, unlabeled)


def _scope_trial_ids(
    *, judge_version: JudgeVersion, calibration_set: CalibrationSet | None, suite
) -> list[int]:
    if calibration_set is not None:
        return list(calibration_set.items.values_list("trial_id", flat=True))
    graded = Grade.objects.filter(judge_version=judge_version).exclude(
        status=Grade.Status.NOT_JUDGED
    )
    if suite is not None:
        graded = graded.filter(trial__run__suite=suite)
    labeled = graded.filter(Q(trial__labels__isnull=False) | Q(trial__adjudications__isnull=False))
    return sorted(set(labeled.values_list("trial_id", flat=True)))


def calibration_label_notes(
    *, judge_version: JudgeVersion, calibration_set: CalibrationSet | None = None, suite=None
) -> tuple[RevisionsAfterReveal, list[tuple[int | None, int]]]:
    """What the calibration page says of its scope's labels: those revised after the reveal
    (counted apart, never in the figures) and the current labels per guidelines version
    (newest first, None last). Queries: 3.
    """
    trial_ids = _scope_trial_ids(
        judge_version=judge_version, calibration_set=calibration_set, suite=suite
    )
    counts = label_guidelines_counts(trial_ids=trial_ids)
    ordered = sorted(counts.items(), key=lambda kv: (kv[0] is None, -(kv[0] or 0)))
    return revisions_after_reveal(trial_ids=trial_ids), ordered


def _warnings(n: int, human: list[bool], th: Thresholds) -> list[str]:
    out = []
    if n < th.min_n:
        out.append(f"n = {n} is below {th.min_n}: the intervals are wide")
    fails = sum(1 for h in human if not h)
    passes = len(human) - fails
    if fails == 0:
        out.append("the set contains no human fails: the false-accept rate cannot be measured")
    elif fails < MIN_CLASS:
        out.append(f"only {fails} human fail(s), fewer than {MIN_CLASS}")
    if passes == 0:
        out.append("the set contains no human passes: the false-reject rate cannot be measured")
    elif passes < MIN_CLASS:
        out.append(f"only {passes} human pass(es), fewer than {MIN_CLASS}")
    return out


def calibration_compute(
    *,
    judge_version: JudgeVersion,
    calibration_set: CalibrationSet | None = None,
    suite=None,
    within_trial_ids: Iterable[int] | None = None,
) -> Calibration:
    """A judge version's ``Calibration``: on ``calibration_set``, else every labeled trial of
    ``suite`` (or all) the version graded, narrowed by ``within_trial_ids``. Errored,
    not-judged and missing grades are counted apart; development trials are left out (the
    one place figures are computed). Queries: 5, plus one per 1,000 disagreements.
    """
    th = trust_thresholds(suite=calibration_set.suite if calibration_set is not None else suite)
    ids = _scope_trial_ids(
        judge_version=judge_version, calibration_set=calibration_set, suite=suite
    )
    if within_trial_ids is not None:
        within = set(within_trial_ids)
        ids = [tid for tid in ids if tid in within]
    development = development_trial_ids([judge_version.id])
    n_development = sum(1 for tid in ids if tid in development)
    ids = [tid for tid in ids if tid not in development]
    refs = reference_labels(trial_ids=ids)
    grades = {
        g.trial_id: g
        for g in Grade.objects.filter(judge_version=judge_version, trial_id__in=ids).only(
            "id", "trial_id", "status", "passed", "reason"
        )
    }
    judge: list[bool] = []
    human: list[bool] = []
    kept: list[int] = []
    errors = missing = not_judged = 0
    differ: list[tuple[int, ReferenceLabel, Grade]] = []
    for tid in sorted(refs.by_trial):
        ref = refs.by_trial[tid]
        grade = grades.get(tid)
        if grade is None:
            missing += 1
            continue
        if grade.status == Grade.Status.NOT_JUDGED:
            not_judged += 1
            continue
        if grade.status != Grade.Status.OK or grade.passed is None:
            errors += 1
            continue
        j, h = bool(grade.passed), ref.verdict == Label.Verdict.PASS
        judge.append(j)
        human.append(h)
        kept.append(tid)
        if j != h:
            differ.append((tid, ref, grade))
    n = len(judge)
    counts: defaultdict[tuple[bool, bool], int] = defaultdict(int)
    for j, h in zip(judge, human, strict=True):
        counts[(j, h)] += 1
    confusion = Confusion(
        counts[(True, True)], counts[(True, False)], counts[(False, True)], counts[(False, False)]
    )
    agree = counts[(True, True)] + counts[(False, False)]
    kappa = cohens_kappa(judge, human)
    far = false_accept_rate(judge, human)
    frr = false_reject_rate(judge, human)
    far_w, weights_note = _weighted_far(calibration_set, judge, human, kept)
    checks = trust_checks(
        n=n,
        human_fails=sum(1 for h in human if not h),
        kappa=kappa,
        far=far,
        far_weighted=far_w,
        th=th,
    )
    reasons = trust_reasons(checks, kappa=kappa, far=far)
    trials = Trial.objects.in_bulk([tid for tid, _, _ in differ])
    keys = dict(
        Trial.objects.filter(id__in=[tid for tid, _, _ in differ]).values_list("id", "case__key")
    )
    disagreements = [
        Disagreement(
            tid,
            str(trials[tid].uuid),
            keys.get(tid, ""),
            ref.verdict,
            ref.critique,
            ref.basis,
            "pass" if grade.passed else "fail",
            grade.reason,
        )
        for tid, ref, grade in differ
    ]
    return Calibration(
        judge_version_id=judge_version.id,
        judge_version_label=str(judge_version),
        calibration_set_id=calibration_set.id if calibration_set else None,
        suite_name=suite.name if suite is not None else None,
        n=n,
        n_judge_errors=errors,
        n_judge_missing=missing,
        n_not_judged=not_judged,
        n_unresolved=len(refs.unresolved),
        n_unlabeled=len(refs.unlabeled),
        confusion=confusion,
        agreement=(agree / n) if n else None,
        agreement_numerator=agree,
        kappa=kappa,
        far=far,
        frr=frr,
        thresholds=th,
        trust_ok=not reasons,
        trust_reasons=reasons,
        trust_checks=checks,
        far_weighted=far_w,
        weights_note=weights_note,
        warnings=_warnings(n, human, th),
        disagreements=disagreements,
        n_development=n_development,
        n_development_total=len(development),
    )


def _weighted_far(
    calibration_set: CalibrationSet | None,
    judge: list[bool],
    human: list[bool],
    trial_ids: list[int],
) -> tuple[WeightedRate | None, str]:
    """The weighted FAR of a planned set (weights 1 / inclusion probability), or None with
    why not: no set, a set without a sampling design, items without a probability."""
    if calibration_set is None:
        return None, "no sampling weights: not a calibration set"
    given = dict(calibration_set.items.values_list("trial_id", "inclusion_probability"))
    probs = {t: p for t, p in given.items() if p is not None}
    if not calibration_set.design or len(probs) < len(given):
        return None, (
            "no sampling weights: the set was not drawn by the planner or has items added "
            "by hand; only the sample figures are available"
        )
    fails = [(j, 1.0 / probs[t]) for j, h, t in zip(judge, human, trial_ids, strict=True) if not h]
    return weighted_far([j for j, _ in fails], [w for _, w in fails]), ""


def calibration_judge_versions(*, suite=None) -> list[JudgeVersion]:
    """Judge versions with at least one grade on a labeled (or adjudicated) trial, of
    ``suite`` when given; ordered by judge name and number."""
    graded = (
        Grade.objects.filter(judge_version__isnull=False)
        .exclude(status=Grade.Status.NOT_JUDGED)
        .filter(Q(trial__labels__isnull=False) | Q(trial__adjudications__isnull=False))
    )
    if suite is not None:
        graded = graded.filter(trial__run__suite=suite)
    ids = set(graded.values_list("judge_version_id", flat=True))
    return list(JudgeVersion.objects.filter(id__in=ids).select_related("judge"))


def human_agreement(*, calibration_set: CalibrationSet | None = None, suite=None) -> HumanAgreement:
    """Agreement and Cohen's kappa among human raters on trials with >= 2 current labels (in
    ``calibration_set``, else ``suite``, else everywhere). Raters: reviewers by user and named
    importers; each unordered pair on a trial is one (a, b), a the smaller key.
    """
    labels = Label.objects.select_related("reviewer")
    if calibration_set is not None:
        labels = labels.filter(trial__calibration_items__calibration_set=calibration_set)
    elif suite is not None:
        labels = labels.filter(trial__run__suite=suite)
    by_trial: dict[int, list[Label]] = defaultdict(list)
    for lab in labels.order_by("trial_id", "id"):
        by_trial[lab.trial_id].append(lab)
    multi = {tid: labs for tid, labs in by_trial.items() if len(labs) >= 2}
    pooled_a: list[str] = []
    pooled_b: list[str] = []
    per_pair: dict[tuple[str, str], tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
    names: dict[str, str] = {}
    for labs in multi.values():
        ordered = sorted(labs, key=_rater)
        for x, y in combinations(ordered, 2):
            names[_rater(x)], names[_rater(y)] = _rater_name(x), _rater_name(y)
            pooled_a.append(x.verdict)
            pooled_b.append(y.verdict)
            a, b = per_pair[(_rater(x), _rater(y))]
            a.append(x.verdict)
            b.append(y.verdict)
    disagreeing = [tid for tid, labs in multi.items() if len({lab.verdict for lab in labs}) > 1]
    adjudicated = set(
        Adjudication.objects.filter(trial_id__in=disagreeing).values_list("trial_id", flat=True)
    )
    by_pair = []
    for (ka, kb), (a, b) in sorted(per_pair.items()):
        agree = sum(1 for x, y in zip(a, b, strict=True) if x == y)
        by_pair.append(
            ReviewerPairAgreement(names[ka], names[kb], len(a), agree / len(a), cohens_kappa(a, b))
        )
    agree = sum(1 for x, y in zip(pooled_a, pooled_b, strict=True) if x == y)
    return HumanAgreement(
        n_trials=len(multi),
        n_pairs=len(pooled_a),
        agreement=(agree / len(pooled_a)) if pooled_a else None,
        kappa=cohens_kappa(pooled_a, pooled_b),
        by_pair=by_pair,
        n_disagreeing=len(disagreeing),
        n_adjudicated=len(adjudicated),
    )


def labels_visible(*, user, detail: bool = False):
    """The labels ``user`` may read (``evals.blindness.labels_visible_to``), trials joined without
    outputs. Lists carry a critique preview (``OUTPUT_PREVIEW_CHARS``) and its length.
    """
    qs = (
        Label.objects.select_related("trial__run", "trial__case", "reviewer", "guidelines")
        .only(
            "id",
            "trial_id",
            "reviewer_id",
            "reviewer_name",
            "verdict",
            "source",
            "version",
            "created_at",
            "updated_at",
            "critique",
            "trial__uuid",
            "trial__attempt",
            "trial__run_id",
            "trial__case_id",
            "trial__run__uuid",
            "trial__case__key",
            "reviewer__username",
            "guidelines__version",
        )
        .annotate(critique_length=Length("critique"))
    )
    if not detail:
        qs = qs.defer("critique").annotate(
            critique_preview=Substr("critique", 1, settings.ASSAY["OUTPUT_PREVIEW_CHARS"])
        )
    return labels_visible_to(qs, user)
