"""Trust stands only while its rule holds on the current labels: after every label change,
in its transaction, each active pointwise approval on the trial is recomputed and lapses
(``judges.trust.trust_lapse``) when the rule fails. Pairwise approvals are not rechecked.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Exists, OuterRef, Q

from evals.models import Grade
from judges.models import JudgeApproval
from judges.trust import trust_lapse
from labeling.models import CalibrationItem
from labeling.pairwise import is_pairwise
from labeling.selectors import calibration_compute


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
        if now.trust_ok:
            continue
        reason = (
            f"lapsed: {change} changed the labels this approval rests on, and the rule no "
            "longer holds: " + "; ".join(now.trust_reasons)
        )
        if trust_lapse(approval=approval, by=by, reason=reason):
            lapsed.append(approval)
    return lapsed
