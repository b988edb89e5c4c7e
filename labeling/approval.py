"""A lead's approval of a judge version, on calibration figures recomputed here: the
labeling side of trust (``judges.trust`` records it; ``labeling.trust_recheck`` lapses it
when later label changes break the rule)."""

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
    """Mark a judge version trusted (leads only), on figures recomputed here, through
    ``judges.trust.trust_grant``.

    Pointwise judges: the figures are recomputed with ``calibration_compute`` on
    ``calibration_set`` (None: every labeled trial). Pairwise judges
    (``labeling.pairwise.is_pairwise``): with ``pairwise_calibration_compute`` on the pairs
    of ``suite`` (None: every pair with a human preference; a calibration set stands for its
    suite), under the pairwise rule (``labeling.trust_rule.pairwise_trust_checks``). Figures
    are never taken from the client: when ``figures`` (what the lead saw) is given and the
    counts have changed since, DomainError asks for a reload. Refused (DomainError) unless
    the thresholds hold, or when an approval is already active. Records who, when and the
    figures (the active approval is the trust). Trust is per version: nothing is inherited.
    Raises PermissionDenied for anyone but a lead.
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
