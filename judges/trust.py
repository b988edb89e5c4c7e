"""A judge version's trust state: the lead's approval record, granted and revoked here,
and what trust changes downstream (the Rogan–Gladen corrected pass rate of its verdicts).

Trust is stored once: a version is trusted while it has an active (unrevoked)
``JudgeApproval``, and an approval lapses (``trust_lapse``) as soon as a label change makes
its rule fail on the current labels (``labeling.trust_recheck``). Labeling decides whether
the calibration figures allow trust (``labeling.approval.judge_trust_approve``) and then
calls ``trust_grant``; judges never imports labeling.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import numpy as np
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import DomainError
from core.roles import LEAD, role_require
from evals.grading.rungs import CorrectedPassRate
from judges.models import JudgeApproval, JudgeVersion
from judges.models.development import development_trial_ids
from stats.correction import corrected_rate_interval


def corrected_pass_rate_from_approval(
    *,
    judge_version_id: int,
    approval_id: int | None,
    approval_figures: dict | None,
    passed: Sequence[int] | np.ndarray,
    graded: Sequence[int] | np.ndarray,
) -> CorrectedPassRate:
    """The Rogan–Gladen correction of a judge's verdicts on a run, case by case: ``passed[i]``
    of ``graded[i]`` ok judge verdicts on case i were passes (errored verdicts already left
    out; cases with no verdict are dropped here). TPR = TP / (TP + FN) and TNR = TN / (TN + FP)
    come from the confusion matrix in ``approval_figures`` (``JudgeApproval.figures``, the
    figures the lead approved on; None = no active approval).

    Estimate and interval: ``stats.correction.corrected_rate_interval`` (Rogan & Gladen 1978
    on the mean of per-case rates; MOVER interval, Zou & Donner 2008, over the Korn–Graubard
    interval clustered by case and the Wilson intervals of TPR and TNR), so "corrected" is
    never more certain than the raw rate. Undefined results are None with a reason
    (untrusted, no verdicts, no human class, a judge no better than chance)."""
    passed_arr = np.asarray(passed, dtype=np.int64)
    graded_arr = np.asarray(graded, dtype=np.int64)
    has = graded_arr > 0
    passed_arr, graded_arr = passed_arr[has], graded_arr[has]
    total_passed, total_graded = int(passed_arr.sum()), int(graded_arr.sum())
    observed = float((passed_arr / graded_arr).mean()) if total_graded else None

    def result(**kw) -> CorrectedPassRate:
        base = {"corrected": None, "ci_low": None, "ci_high": None, "tpr": None, "tnr": None}
        base.update(kw)
        return CorrectedPassRate(
            judge_version_id=judge_version_id,
            approval_id=approval_id,
            observed=observed,
            observed_numerator=total_passed,
            observed_denominator=total_graded,
            **base,
        )

    if approval_figures is None:
        return result(reason="the judge version is not trusted")
    c = approval_figures.get("confusion") or {}
    tp, fn = int(c.get("judge_pass_human_pass", 0)), int(c.get("judge_fail_human_pass", 0))
    tn, fp = int(c.get("judge_fail_human_fail", 0)), int(c.get("judge_pass_human_fail", 0))
    if not (tp + fn) or not (tn + fp):
        return result(reason="the approval's figures lack human passes or fails")
    tpr, tnr = tp / (tp + fn), tn / (tn + fp)
    if observed is None:
        return result(tpr=tpr, tnr=tnr, reason="no judge verdicts on this run")
    est = corrected_rate_interval(passed_arr, graded_arr, tp=tp, fn=fn, tn=tn, fp=fp)
    return result(
        corrected=est.estimate,
        ci_low=est.ci_low,
        ci_high=est.ci_high,
        tpr=tpr,
        tnr=tnr,
        reason=est.reason,
        method=est.method,
    )


def active_approval_get(*, judge_version: JudgeVersion) -> JudgeApproval | None:
    """The judge version's unrevoked approval, or None (untrusted)."""
    return (
        JudgeApproval.objects.active()
        .filter(judge_version=judge_version)
        .select_related("approved_by", "calibration_set")
        .first()
    )


@transaction.atomic
def trust_grant(
    *, judge_version: JudgeVersion, by, figures: dict, calibration_set_id: int | None = None
) -> JudgeApproval:
    """Record a lead's approval of ``judge_version`` on ``figures`` (the calibration figures
    as JSON, ``labeling.figures.Calibration.as_json()``), optionally on a calibration set.

    Compare-and-set on the version's one active approval (a unique constraint): a second
    grant, concurrent or not, is refused. Raises PermissionDenied for anyone but a lead and
    ``DomainError`` (code "conflict", field "judge_version") when the version is already
    trusted. Whether the figures allow trust is the caller's rule, not this function's, with
    one exception kept here: a version built from labels (``DevelopmentLabel``) is refused
    (``DomainError``, field "figures") unless ``figures["n_development_total"]`` says all its
    development trials were held out (``labeling.selectors.calibration_compute`` does), so
    no caller can grant trust on figures computed on the labels the version was built from.
    """
    role_require(by, LEAD, action="approving a judge")
    dev = development_trial_ids([judge_version.id])
    if dev and figures.get("n_development_total") != len(dev):
        raise DomainError(
            f"{judge_version} was built from the labels of {len(dev)} trial(s); trust needs "
            "figures computed on held-out labels only",
            field="figures",
        )
    JudgeVersion.objects.select_for_update().filter(pk=judge_version.pk).exists()
    if JudgeApproval.objects.active().filter(judge_version=judge_version).exists():
        raise DomainError(
            f"{judge_version} is already trusted", field="judge_version", code="conflict"
        )
    try:
        with transaction.atomic():
            approval = JudgeApproval.objects.create(
                judge_version=judge_version,
                calibration_set_id=calibration_set_id,
                approved_by=by,
                approved_at=timezone.now(),
                figures=figures,
            )
    except IntegrityError as exc:  # a concurrent grant won the unique active approval
        raise DomainError(
            f"{judge_version} is already trusted", field="judge_version", code="conflict"
        ) from exc
    judge_version.trusted = True
    return approval


@transaction.atomic
def trust_revoke(
    *, judge_version: JudgeVersion, by, reason: str, approval_uuid: UUID | None = None
) -> JudgeApproval:
    """Revoke ``judge_version``'s active approval (leads only; a reason is required); the
    approval row keeps who, when and why.

    ``approval_uuid`` is the approval the lead was shown (None skips the check): a
    compare-and-set, so a revoke form opened before that approval was revoked and another
    granted never revokes the newer one unseen. Raises PermissionDenied, ``DomainError``
    (field "reason": no reason; field "judge_version": not trusted; code "conflict" on
    "approval", with ``current_approval``, when the active approval is not the one shown,
    naming who granted it and when)."""
    role_require(by, LEAD, action="revoking trust")
    if not (reason or "").strip():
        raise DomainError("revoking trust needs a reason", field="reason")
    approval = (
        JudgeApproval.objects.active()
        .select_for_update()
        .filter(judge_version=judge_version)
        .select_related("approved_by")
        .first()
    )
    if approval_uuid is not None and (approval is None or approval.uuid != approval_uuid):
        raise _revoke_stale(judge_version, approval, approval_uuid)
    if approval is None:
        raise DomainError(f"{judge_version} is not trusted", field="judge_version")
    approval.revoked_at, approval.revoked_by = timezone.now(), by
    approval.revoke_reason = reason.strip()
    approval.save(update_fields=["revoked_at", "revoked_by", "revoke_reason"])
    judge_version.trusted = False
    return approval


def trust_lapse(*, approval: JudgeApproval, by, reason: str) -> bool:
    """Revoke ``approval`` because the rule it was granted under no longer holds on the
    current labels (the caller recomputed it: ``labeling.trust_recheck``). ``by`` is the user
    whose label change made it lapse, ``reason`` says why; the row keeps who, when and why,
    as a lead's revocation does. Compare-and-set on the approval being active: True when this
    call revoked it, False when it was revoked already (by a lead, or a concurrent lapse)."""
    return bool(
        JudgeApproval.objects.active()
        .filter(pk=approval.pk)
        .update(revoked_at=timezone.now(), revoked_by=by, revoke_reason=reason)
    )


def _when(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M")


def _revoke_stale(
    judge_version: JudgeVersion, active: JudgeApproval | None, shown: UUID
) -> DomainError:
    """The refusal of a revoke whose form showed approval ``shown``, no longer the active
    one (``active``: the version's active approval now, or None)."""
    seen = JudgeApproval.objects.filter(uuid=shown, judge_version=judge_version).first()
    if active is not None:
        now = (
            f"a newer approval exists, by {active.approved_by.get_username()} at "
            f"{_when(active.approved_at)}"
        )
    else:
        now = f"{judge_version} is no longer trusted"
    if seen is not None and seen.revoked_at is not None:
        by = seen.revoked_by.get_username() if seen.revoked_by_id else "someone"
        now = f"the approval you saw was revoked by {by} at {_when(seen.revoked_at)}; {now}"
    return DomainError(
        detail=f"{now}: nothing was revoked — read it, then revoke it if you still mean to",
        field="approval",
        code="conflict",
        current_approval=str(active.uuid) if active is not None else None,
    )
