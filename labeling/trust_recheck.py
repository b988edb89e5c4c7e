"""Trust stands only while its rule holds on the current labels: after every change of a label
of record, in its transaction, each active approval that counted it is recomputed and lapses
(``judges.trust.trust_lapse``) when its rule fails: pointwise approvals on a trial's pass/fail
labels (``trust_recheck``), pairwise approvals on a pair's preferences
(``pairwise_trust_recheck``).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Exists, OuterRef, Q

from evals.models import Grade, Suite, TrialPair
from judges.models import JudgeApproval
from judges.trust import trust_lapse
from labeling.models import CalibrationItem
from labeling.pairwise import is_pairwise, pairwise_calibration_compute
from labeling.selectors import calibration_compute


def _lapse(approval: JudgeApproval, *, reasons: list[str], by, change: str) -> bool:
    """Revoke ``approval`` whose rule failed for ``reasons`` after ``change``; True when this
    call revoked it."""
    reason = (
        f"lapsed: {change} changed the labels this approval rests on, and the rule no "
        "longer holds: " + "; ".join(reasons)
    )
    return trust_lapse(approval=approval, by=by, reason=reason)


def trust_recheck(*, trial_ids: Iterable[int], by, change: str) -> list[JudgeApproval]:
    """Lapse the active pointwise approvals on ``trial_ids`` whose rule fails now; returns them.
    ``change``: what changed, in words. Call inside the label change's transaction. Queries:
    1 with no approval on the trials, else a recompute per approval.
    """
    trial_ids = list(trial_ids)
    in_sets = CalibrationItem.objects.filter(trial_id__in=trial_ids).values("calibration_set_id")
    graded = Grade.objects.filter(
        trial_id__in=trial_ids, judge_version_id=OuterRef("judge_version_id")
    )
    approvals = (
        JudgeApproval.objects.active()
        .filter(
            Q(calibration_set_id__in=in_sets) | (Q(calibration_set__isnull=True) & Exists(graded))
        )
        .select_related("judge_version__judge", "calibration_set")
    )
    lapsed = []
    for approval in approvals:
        version = approval.judge_version
        if is_pairwise(version):
            continue
        now = calibration_compute(judge_version=version, calibration_set=approval.calibration_set)
        if not now.trust_ok and _lapse(approval, reasons=now.trust_reasons, by=by, change=change):
            lapsed.append(approval)
    return lapsed


def pairwise_trust_recheck(*, pair_id: int, by, change: str) -> list[JudgeApproval]:
    """Lapse the active pairwise approvals whose calibration counted pair ``pair_id`` (their
    version judged it, within the suite their figures name, if any) and whose rule
    (``labeling.trust_rule.pairwise_trust_checks``) fails now; returns them. ``change``: what
    changed, in words. Call inside the preference change's transaction. Queries: 2 with no
    such approval, else a recompute per approval.
    """
    pair_suite = (
        TrialPair.objects.filter(id=pair_id)
        .values_list("case__suite__uuid", "case__suite__name")
        .first()
    )
    approvals = (
        JudgeApproval.objects.active()
        .filter(judge_version__pairwise_verdicts__pair_id=pair_id)
        .distinct()
        .select_related("judge_version__judge")
    )
    lapsed = []
    for approval in approvals:
        in_scope, suite = _approval_scope(approval.figures or {}, pair_suite)
        if not in_scope:
            continue
        now = pairwise_calibration_compute(judge_version=approval.judge_version, suite=suite)
        if not now.trust_ok and _lapse(approval, reasons=now.trust_reasons, by=by, change=change):
            lapsed.append(approval)
    return lapsed


def _approval_scope(figures: dict, pair_suite: tuple | None) -> tuple[bool, Suite | None]:
    """``(in scope, suite)`` of a pairwise approval for a changed pair: the suite its figures
    were computed on (None: every pair the version judged), and whether the pair
    (``pair_suite``: its suite's (uuid, name)) lies in it. Matched by the suite's uuid, since a
    suite can be renamed; figures recorded before they carried the uuid (migration labeling
    0013 filled it in where the name still matched) by name."""
    scope_uuid, scope_name = figures.get("suite_uuid"), figures.get("suite_name")
    if scope_uuid is None and scope_name is None:
        return True, None
    pair_uuid, pair_name = pair_suite if pair_suite is not None else (None, None)
    if scope_uuid is not None:
        if str(pair_uuid) != scope_uuid:
            return False, None
        return True, Suite.objects.get(uuid=scope_uuid)
    if scope_name != pair_name:
        return False, None
    return True, Suite.objects.get(name=scope_name)
