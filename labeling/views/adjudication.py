"""Adjudication: trials where reviewers disagree, and the lead's decision."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.errors import DomainError
from core.forms import unstorable_shown_on_form
from core.http import HtmxHttpRequest, form_error, role_required
from core.ids import uuid_parse
from core.roles import LEAD
from evals.models import Suite, Trial
from labeling import adjudication
from labeling.adjudication import human_disagreements
from labeling.forms import AdjudicationForm
from labeling.models import CalibrationSet
from labeling.views._common import _set_or_404


def _adjudication_scope(
    request: HtmxHttpRequest, data
) -> tuple[CalibrationSet | None, Suite | None]:
    """``set=<uuid>`` or ``suite=<uuid>`` (neither: everywhere); 404 unknown, 400 no UUID."""

    set_id, suite_id = data.get("set"), data.get("suite")
    if set_id:
        if uuid_parse(set_id) is None:
            raise BadRequest(f"set: expected a UUID, got {set_id[:100]!r}")
        return _set_or_404(set_id), None
    if suite_id:
        if uuid_parse(suite_id) is None:
            raise BadRequest(f"suite: expected a UUID, got {suite_id[:100]!r}")
        return None, get_object_or_404(Suite, uuid=suite_id)
    return None, None


def _adjudication_render(
    request: HtmxHttpRequest, cset, suite, *, forms_by_trial=None, status: int = 200
) -> HttpResponse:
    items = human_disagreements(calibration_set=cset, suite=suite)
    forms_by_trial = forms_by_trial or {}
    rows = [
        (
            d,
            forms_by_trial.get(d.trial.uuid)
            or AdjudicationForm(
                initial={
                    "trial": d.trial.uuid,
                    "verdict": d.decision.verdict if d.decision else None,
                    "expected_version": d.decision_version,
                },
                auto_id=f"adj-{d.trial.uuid}-%s",
            ),
        )
        for d in items
    ]
    return render(
        request,
        "labeling/adjudication_list.html",
        {
            "cset": cset,
            "suite": suite,
            "rows": rows,
            "n_open": sum(1 for d in items if d.decision is None),
        },
        status=status,
    )


@require_GET
@role_required(LEAD)
def adjudication_list(request: HtmxHttpRequest) -> HttpResponse:
    """Trials where reviewers disagree, with every verdict and critique and a decision form."""
    cset, suite = _adjudication_scope(request, request.GET)
    return _adjudication_render(request, cset, suite)


@unstorable_shown_on_form
@require_POST
@role_required(LEAD)
def adjudication_save(request: HtmxHttpRequest) -> HttpResponse:
    """Record the lead's decision (``adjudication_record``). An invalid form: the page again with
    the errors and input (400); a stale one: the page with the newest decision and the lead's
    input kept, the form on that version (409).
    """
    cset, suite = _adjudication_scope(request, request.POST)
    form = AdjudicationForm(request.POST)
    trial, status = None, 400
    if form.is_valid():
        trial = Trial.objects.select_related("case").filter(uuid=form.cleaned_data["trial"]).first()
        if trial is None:
            raise Http404("No such trial.")
        try:
            adjudication.adjudication_record(
                trial=trial,
                lead=request.user,
                verdict=form.cleaned_data["verdict"],
                reason=form.cleaned_data["reason"],
                expected_version=form.cleaned_data["expected_version"],
            )
        except DomainError as exc:
            if "current_version" in exc.extra:  # stale: the form moves to the newest decision
                data = request.POST.copy()
                data["expected_version"] = str(exc.extra["current_version"])
                form, status = AdjudicationForm(data), 409
                form.is_valid()
            form_error(form, exc)
    if not form.is_valid():
        trial_uuid = form.cleaned_data.get("trial") if hasattr(form, "cleaned_data") else None
        form.auto_id = f"adj-{trial_uuid}-%s"
        return _adjudication_render(
            request, cset, suite, forms_by_trial={trial_uuid: form}, status=status
        )
    assert trial is not None  # the form was valid: the trial was read
    messages.success(
        request,
        f"Decided {form.cleaned_data['verdict']} on case "
        f"{trial.case.key} (attempt {trial.attempt}).",
    )
    query = f"?set={cset.uuid}" if cset else (f"?suite={suite.uuid}" if suite else "")
    return redirect(reverse("labeling:adjudication") + query)
