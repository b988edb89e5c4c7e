"""What several of labeling's view modules share: the set and version lookups (404 when
unknown), the calibration scope and URL, and who sees calibration."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import reverse

from core.http import HtmxHttpRequest, query_object
from core.roles import ENGINEER, LEAD
from evals.models import Suite
from judges.models import JudgeVersion
from labeling.models import CalibrationSet

CALIBRATION_ROLES = (ENGINEER, LEAD)


def _set_or_404(set_id) -> CalibrationSet:
    return get_object_or_404(
        CalibrationSet.objects.select_related("suite", "run", "judge_version__judge"), uuid=set_id
    )


def _version_or_404(version_id) -> JudgeVersion:
    return get_object_or_404(JudgeVersion.objects.select_related("judge"), uuid=version_id)


def _scope(request: HtmxHttpRequest) -> tuple[CalibrationSet | None, Suite | None]:
    """``?set=<uuid>`` or ``?suite=<uuid>``: 404 naming it when unknown, 400 when no UUID."""
    sets = CalibrationSet.objects.select_related("suite", "run")
    cset = query_object(request, "set", sets, noun="calibration set")
    suite = None if cset is not None else query_object(request, "suite", Suite.objects.all())
    return cset, suite


def _calibration_url(version: JudgeVersion, cset: CalibrationSet | None) -> str:
    url = reverse("labeling:calibration", kwargs={"version_id": version.uuid})
    return f"{url}?set={cset.uuid}" if cset else url
