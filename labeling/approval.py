"""A lead's approval of a judge version on figures recomputed here; ``judges.trust`` records
it, ``labeling.trust_recheck`` lapses it.
"""

from __future__ import annotations

from django.db import transaction

from core.errors import DomainError
from core.roles import LEAD, role_require
from judges.models import JudgeApproval, JudgeVersion
from judges.trust import trust_grant
from labeling.figures import Calibration, PairwiseCalibration
from labeling.models import CalibrationSet
from labeling.pairwise import is_pairwise, pairwise_calibration_compute
from labeling.selectors import calibration_compute


def _same_figures(shown: Calibration | PairwiseCalibration, now: Calibration) -> bool:
    fields = ("n", "confusion", "n_judge_errors")
    return all(getattr(shown, f) == getattr(now, f) for f in fields)


def _same_pairwise_figures(
    shown: Calibration | PairwiseCalibration, now: PairwiseCalibration
) -> bool:
    fields = ("n", "agreement_numerator", "n_inconsistent", "n_judge_errors", "n_unresolved")
    return all(getattr(shown, f) == getattr(now, f) for f in fields)


def judge_trust_approve(
    *,
    judge_version: JudgeVersion,
    by,
    calibration_set: CalibrationSet | None = None,
    figures: Calibration | PairwiseCalibration | None = None,
    suite=None,
) -> JudgeApproval:
    """Mark a judge version trusted (leads) through ``judges.trust.trust_grant``, on figures
    recomputed here: pointwise on ``calibration_set`` (None: all), pairwise on ``suite``.
    Raises PermissionDenied; DomainError when they differ from ``figures`` (what the lead
    saw), the thresholds fail, or an approval is active.
    """
    role_require(by, LEAD, action="approving a judge")
    if is_pairwise(judge_version):
        return _pairwise_trust_approve(
            judge_version=judge_version,
            by=by,
            suite=calibration_set.suite if calibration_set is not None else suite,
            figures=figures,
        )
    with transaction.atomic():
        JudgeVersion.objects.select_for_update().filter(pk=judge_version.pk).exists()
        current = calibration_compute(judge_version=judge_version, calibration_set=calibration_set)
        if figures is not None and not _same_figures(figures, current):
            raise DomainError(
                "the calibration changed since the page was loaded; reload and check the "
                "figures again"
            )
        if not current.trust_ok:
            raise DomainError("thresholds not met: " + "; ".join(current.trust_reasons))
        return trust_grant(
            judge_version=judge_version,
            by=by,
            figures=current.as_json(),
            calibration_set_id=calibration_set.id if calibration_set else None,
        )


def _pairwise_trust_approve(
    *,
    judge_version: JudgeVersion,
    by,
    suite,
    figures: Calibration | PairwiseCalibration | None,
) -> JudgeApproval:
    with transaction.atomic():
        JudgeVersion.objects.select_for_update().filter(pk=judge_version.pk).exists()
        current = pairwise_calibration_compute(judge_version=judge_version, suite=suite)
        if figures is not None and not _same_pairwise_figures(figures, current):
            raise DomainError(
                "the calibration changed since the page was loaded; reload and check the "
                "figures again"
            )
        if not current.trust_ok:
            raise DomainError("thresholds not met: " + "; ".join(current.trust_reasons))
        return trust_grant(judge_version=judge_version, by=by, figures=current.as_json())
