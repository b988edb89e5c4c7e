"""A lead's assignment of a calibration set (``labeling.assignment``): assigning reviewers with
an overlap, and moving a leaving reviewer's unlabeled items. Both answer with the set's page."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from core.errors import DomainError
from core.http import HtmxHttpRequest, form_error, role_required
from core.roles import LEAD
from labeling.assignment import assignment_reassign, assignment_set
from labeling.forms import AssignmentForm, ReassignForm
from labeling.models import CalibrationSet
from labeling.views._common import _set_or_404
from labeling.views.sets import _set_page


def _refused(request: HtmxHttpRequest, cset: CalibrationSet, form: forms.Form) -> HttpResponse:
    return _set_page(request, cset, assignment_forms={type(form).__name__: form}, status=400)


@require_POST
@role_required(LEAD)
def assignment_save(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Assign the set's items (``assignment_set``); refused: the set page with the error."""
    cset = _set_or_404(set_id)
    form = AssignmentForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            assignment_set(
                calibration_set=cset,
                reviewers=list(data["reviewers"]),
                overlap=data["overlap"],
                seed=data["seed"],
                by=request.user,
            )
        except DomainError as exc:
            form_error(form, exc)
        else:
            messages.success(
                request,
                f"Assigned: each item to {data['overlap']} of {len(data['reviewers'])} reviewers.",
            )
            return redirect("labeling:set-detail", set_id=cset.uuid)
    return _refused(request, cset, form)


@require_POST
@role_required(LEAD)
def assignment_reassign_save(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Move a leaving reviewer's unlabeled items (``assignment_reassign``); refused: the set
    page with the error, nothing changed.
    """
    cset = _set_or_404(set_id)
    if not hasattr(cset, "assignment"):
        messages.error(request, "This set has no assignment; assign reviewers first.")
        return redirect("labeling:set-detail", set_id=cset.uuid)
    form = ReassignForm(request.POST, calibration_set=cset)
    if form.is_valid():
        data = form.cleaned_data
        try:
            moved = assignment_reassign(
                calibration_set=cset,
                from_reviewer=data["from_reviewer"],
                to_reviewers=list(data["to_reviewers"]) or None,
                by=request.user,
            )
        except DomainError as exc:
            form_error(form, exc)
        else:
            messages.success(
                request,
                f"Moved {moved} unlabeled item{'s' if moved != 1 else ''} of "
                f"{data['from_reviewer'].get_username()}.",
            )
            return redirect("labeling:set-detail", set_id=cset.uuid)
    return _refused(request, cset, form)
