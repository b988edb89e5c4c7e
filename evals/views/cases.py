"""HTML views of the case editor: new case (from scratch, a trial or a comparison case), edit,
retire. Thin over ``evals.case_changes``; engineers and leads only (others 403)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import DomainError
from core.forms import unstorable_shown_on_form
from core.http import form_error, query_object, role_required
from evals.case_changes import (
    CASE_EDITOR_ROLES,
    case_add,
    case_edit,
    case_prefill,
    case_retire,
    source_trial_resolve,
    suites_editable_by,
)
from evals.forms import CaseForm
from evals.models import Case, Suite, Trial

SAID = {
    "created": "Case {key} added to {suite}.",
    "replaced": "Case {key} saved: the old case is retired and replaced by this one.",
    "retagged": "Tags of case {key} saved (tags are not content: the case is the same).",
    "unchanged": "Nothing changed: case {key} already has this content.",
}
SAID_ALREADY = "Case {key} saved: the case you edited was already replaced by this content."


@unstorable_shown_on_form
@require_http_methods(["GET", "POST"])
@role_required(*CASE_EDITOR_ROLES)
def case_new(request: HttpRequest) -> HttpResponse:
    """A new case. GET prefills from ``?trial=`` (its output as expected), ``?case=`` or
    ``?suite=``; POST saves through ``case_add`` and goes to the suite page."""
    suites = suites_editable_by(request.user)
    if request.method == "POST":
        form = CaseForm(request.POST, suites=suites)
        trial, conflict = None, False
        if form.is_valid():
            data = form.cleaned_data
            try:
                trial = source_trial_resolve(data.get("source_trial"))
                done = case_add(
                    suite=data["suite"],
                    spec=data["spec"],
                    by=request.user,
                    source_trial=trial,
                    replace=data["replace"],
                )
            except DomainError as exc:
                form_error(form, exc)
                # The key holds other content: the page offers the explicit choice.
                conflict = exc.code == "conflict" and exc.field == "key"
            else:
                suite = data["suite"]
                messages.success(
                    request, SAID[done.action].format(key=done.case.key, suite=suite.name)
                )
                return redirect("evals:suite-detail", suite_id=suite.uuid)
        return render(
            request,
            "evals/case_new.html",
            {"form": form, "conflict": conflict, "prefill": None, "trial": trial},
        )
    # Each id: malformed a 400, unknown a 404 naming it (never silently an empty form).
    trial = query_object(request, "trial", Trial.objects.select_related("run__suite", "case"))
    case = None
    if trial is None:
        case = query_object(request, "case", Case.objects.select_related("suite"))
    asked = query_object(request, "suite", Suite.objects.all())
    prefill = case_prefill(trial=trial, case=case)
    initial = CaseForm.initial_from(prefill.spec)
    suite = prefill.suite or asked
    if suite is not None and suites.filter(id=suite.id).exists():
        initial["suite"] = suite
    if trial is not None:
        initial["source_trial"] = trial.uuid
    form = CaseForm(initial=initial, suites=suites)
    return render(
        request,
        "evals/case_new.html",
        {"form": form, "prefill": prefill, "trial": trial, "source_case": case},
    )


@unstorable_shown_on_form
@require_http_methods(["GET", "POST"])
@role_required(*CASE_EDITOR_ROLES)
def case_edit_view(request: HttpRequest, suite_id, case_id) -> HttpResponse:
    """Edit an active case (``case_edit``), back to the suite page; a retired one is read-only."""
    suite = get_object_or_404(Suite, uuid=suite_id)
    case = get_object_or_404(Case.objects.select_related("suite"), uuid=case_id, suite=suite)
    if request.method == "POST":
        form = CaseForm(request.POST)
        if form.is_valid():
            try:
                done = case_edit(
                    case=case,
                    spec=form.cleaned_data["spec"],
                    by=request.user,
                    seen_tags=form.cleaned_data.get("tags_seen"),
                )
            except DomainError as exc:
                form_error(form, exc)
            else:
                said = SAID[done.action]
                if done.action == "unchanged" and done.case.id != case.id:
                    said = SAID_ALREADY  # the same form sent twice: the first one saved it
                messages.success(request, said.format(key=done.case.key, suite=suite.name))
                return redirect("evals:suite-detail", suite_id=suite.uuid)
        return render(request, "evals/case_edit.html", {"form": form, "case": case, "suite": suite})
    form = CaseForm(initial=CaseForm.initial_from(case))
    return render(request, "evals/case_edit.html", {"form": form, "case": case, "suite": suite})


@require_POST
@role_required(*CASE_EDITOR_ROLES)
def case_retire_view(request: HttpRequest, suite_id, case_id) -> HttpResponse:
    """Retire an active case (``evals.case_changes.case_retire``); back to the suite page."""
    suite = get_object_or_404(Suite, uuid=suite_id)
    case = get_object_or_404(Case, uuid=case_id, suite=suite)
    try:
        case_retire(case=case, by=request.user)
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Case {case.key} retired: new runs no longer ask it.")
    return redirect("evals:suite-detail", suite_id=suite.uuid)
