"""Trust stands only while its rule holds on the current labels.

A lead approves a judge version on calibration figures computed from human labels
(``labeling.approval.judge_trust_approve``). Those labels can change afterwards: a relabel,
an undo, a lead's adjudication. After every such change, in the same transaction, each
active pointwise approval that rests on the changed trial (its calibration set holds the
trial; an approval on every labeled trial, when the version graded it) has its figures
recomputed (``labeling.selectors.calibration_compute``, the function approval used); when
the rule no longer holds, the approval lapses (``judges.trust.trust_lapse``), naming the
change and the failed thresholds. A lapsed version is untrusted until a lead approves it
again on figures that meet the rule. So: trusted ⇒ the rule holds on the current labels.

Pairwise approvals rest on preference labels, which this does not watch yet.
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
    """Lapse every active pointwise approval resting on ``trial_ids`` whose rule no longer
    holds on the current labels; returns the approvals that lapsed. ``by``: the user who
    changed the labels; ``change``: what changed, in words ("bob's label on trial …").
    Call inside the transaction of the label change. One query when no approval rests on
    the trials; otherwise one calibration recompute per approval resting on them."""
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
