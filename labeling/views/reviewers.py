"""Reviewers' records (``labeling.reviewer_record``): leads read every reviewer's, a reviewer
their own only (another's is a 404, as an unknown name)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from core.http import HtmxHttpRequest, query_object, role_required
from core.roles import LEAD, REVIEWER, user_has_role
from labeling.models import CalibrationSet
from labeling.reviewer_record import SESSION_GAP_SECONDS, reviewer_record_get, reviewers_get


@require_GET
@role_required(LEAD)
def reviewer_list(request: HtmxHttpRequest) -> HttpResponse:
    """Every user holding a label, with a link to their record; leads only (403)."""
    return render(request, "labeling/reviewer_list.html", {"reviewers": reviewers_get()})


@require_GET
@role_required(REVIEWER, LEAD)
def reviewer_record(request: HtmxHttpRequest, username: str) -> HttpResponse:
    """One reviewer's record; ``?set=<uuid>`` limits it to a calibration set (400 malformed,
    404 unknown). Leads: anyone's; a reviewer: their own (anyone else's is a 404)."""
    is_self = request.user.get_username() == username
    if not is_self and not user_has_role(request.user, LEAD):
        raise Http404("No such reviewer.")
    reviewer = get_user_model().objects.filter(username=username).first()
    if reviewer is None:
        raise Http404("No such reviewer.")
    cset = query_object(request, "set", CalibrationSet.objects.all(), noun="calibration set")
    record = reviewer_record_get(reviewer=reviewer, viewer=request.user, calibration_set=cset)
    return render(
        request,
        "labeling/reviewer_record.html",
        {
            "record": record,
            "cset": cset,
            "is_self": is_self,
            "session_gap_minutes": SESSION_GAP_SECONDS // 60,
        },
    )
