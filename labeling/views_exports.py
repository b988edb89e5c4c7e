"""Download of a calibration set's export (``labeling.exports.calibration_table``) as CSV or
Parquet, linked from the set's page.

``?format=csv|parquet`` (default csv), ``?tz=<IANA zone>`` (default UTC) for the label
times, ``?judge_version=<uuid>`` for another judge's verdicts (default: the set's own).
Engineers and leads only, like the calibration page: the file holds judge verdicts and every
reviewer's label, which a reviewer labeling blind must not see. A bad option is a 400.
"""

from __future__ import annotations

import uuid

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from core.http import role_required
from core.roles import ENGINEER, LEAD
from evals.views.exports import table_download_response
from judges.models import JudgeVersion
from labeling.exports import calibration_table
from labeling.models import CalibrationSet


@require_GET
@role_required(ENGINEER, LEAD)
def calibration_export(request: HttpRequest, set_id) -> HttpResponse:
    """A calibration set, one row per item (``labeling.exports.calibration_table``)."""
    cset = get_object_or_404(
        CalibrationSet.objects.select_related("judge_version__judge"), uuid=set_id
    )
    raw, version = request.GET.get("judge_version"), None
    if raw:
        try:
            version_id = uuid.UUID(raw)
        except ValueError:
            return HttpResponseBadRequest(
                f"judge_version: expected a UUID, got {raw!r}",
                content_type="text/plain; charset=utf-8",
            )
        version = get_object_or_404(JudgeVersion.objects.select_related("judge"), uuid=version_id)
    return table_download_response(
        request,
        lambda zone: calibration_table(calibration_set=cset, judge_version=version, zone=zone),
        f"calibration-{cset.uuid}",
    )
