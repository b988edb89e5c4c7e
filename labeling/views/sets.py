"""Calibration sets: the list, building one, its page, its items, its top-up and its
guidelines for reviewers."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Count
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import DomainError
from core.forms import unstorable_shown_on_form
from core.http import VIEWER_ROLES, HtmxHttpRequest, form_error, query_object, role_required
from core.roles import ENGINEER, LEAD, user_has_role
from evals.models import Run, Trial
from judges.models import JudgeVersion
from labeling import calibration_sets
from labeling.assignment import assignment_progress_get, items_for_reviewer
from labeling.forms import (
    AssignmentForm,
    CalibrationInstructionsForm,
    CalibrationItemForm,
    CalibrationSetBuildForm,
    ReassignForm,
)
from labeling.guidelines import calibration_set_instructions_set, guidelines_versions_get
from labeling.models import CalibrationSet
from labeling.notes import open_questions_get
from labeling.sampling import set_plan_get
from labeling.views._common import _set_or_404

BUILDER_ROLES = (ENGINEER, LEAD)


@require_GET
@role_required(*VIEWER_ROLES)
def calibration_set_list(request: HtmxHttpRequest) -> HttpResponse:
    """Calibration sets, newest first, with their suite, run and size."""
    sets = CalibrationSet.objects.select_related("suite", "run", "judge_version__judge")
    return render(request, "labeling/calibration_set_list.html", {"sets": sets})


@unstorable_shown_on_form
@require_http_methods(["GET", "POST"])
@role_required(*BUILDER_ROLES)
def calibration_set_new(request: HtmxHttpRequest) -> HttpResponse:
    """Build a calibration set (``calibration_set_build``); ``?run=`` and ``?judge_version=``
    prefill.
    """
    if request.method == "POST":
        form = CalibrationSetBuildForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                cset = calibration_sets.calibration_set_build(
                    run=data["run"],
                    name=data["name"],
                    by=request.user,
                    judge_version=data["judge_version"],
                    size=data["size"],
                    seed=data["seed"],
                )
            except DomainError as exc:
                form_error(form, exc)
            else:
                messages.success(request, f"Built {cset.name} with {cset.size} trials.")
                return redirect("labeling:set-detail", set_id=cset.uuid)
        return render(request, "labeling/calibration_set_new.html", {"form": form}, status=400)
    initial: dict[str, object] = {"size": 30, "seed": 0}
    # A malformed ?run= is a 400, an unknown run or judge version a 404 naming it.
    for key, rows, noun in (
        ("run", Run.objects.all(), "run"),
        ("judge_version", JudgeVersion.objects.all(), "judge version"),
    ):
        row = query_object(request, key, rows, noun=noun)
        if row is not None:
            initial[key] = str(row.uuid)
    form = CalibrationSetBuildForm(initial=initial)
    return render(request, "labeling/calibration_set_new.html", {"form": form})


@require_GET
@role_required(*VIEWER_ROLES)
def calibration_set_detail(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """A set's trials in queue order with how many reviewers labeled each (no verdicts)."""
    return _set_page(request, _set_or_404(set_id))


def _set_page(
    request: HtmxHttpRequest,
    cset: CalibrationSet,
    *,
    instructions_form: CalibrationInstructionsForm | None = None,
    item_form: CalibrationItemForm | None = None,
    guidelines_conflict: str | None = None,
    assignment_forms: dict | None = None,
    status: int = 200,
) -> HttpResponse:
    """Render the set page with the guidelines and "add a trial" forms (a refused post's bound
    form, else fresh); ``guidelines_conflict``: the current text a stale form was refused on.
    A lead sees the assignment (``labeling.assignment``) with its forms, a reviewer only their
    items and their own progress.
    """
    items = cset.items.all()
    lead = user_has_role(request.user, LEAD)
    own = not user_has_role(request.user, ENGINEER, LEAD)  # a reviewer: their items only
    if own:
        items = items_for_reviewer(items, request.user)
    items = (
        items.select_related("trial__case", "trial__run")
        .annotate(n_labels=Count("trial__labels"))
        .order_by("position", "id")
    )
    progress = assignment_progress_get(calibration_set=cset, reviewer=request.user if own else None)
    rows = list(items)
    if progress is not None and progress.items:
        for item in rows:  # labels got of k, for the items table
            got = progress.items.get(item.id, (0, progress.assignment.overlap))
            item.assigned_got = got  # type: ignore[attr-defined]  # the items table's cell
    if lead:
        assignment_forms = {
            "AssignmentForm": AssignmentForm(
                initial={
                    "overlap": progress.assignment.overlap if progress else 2,
                    "seed": cset.seed,
                }
            ),
            "ReassignForm": ReassignForm(calibration_set=cset) if progress else None,
            **(assignment_forms or {}),
        }
    plan = None
    if user_has_role(request.user, ENGINEER, LEAD):  # the plan speaks of judge verdicts
        try:
            plan = set_plan_get(calibration_set=cset)
        except DomainError as exc:
            messages.error(request, str(exc))
    return render(
        request,
        "labeling/calibration_set_detail.html",
        {
            "cset": cset,
            "items": rows,
            "item_form": item_form or CalibrationItemForm(),
            "instructions_form": instructions_form
            or CalibrationInstructionsForm(
                initial={
                    "instructions": cset.instructions,
                    "expected_version": cset.instructions_version,
                }
            ),
            "guidelines_conflict": guidelines_conflict,
            "guidelines_versions": guidelines_versions_get(calibration_set=cset),
            "plan": plan,
            # Leads answer reviewers' questions (labeling.notes).
            "open_questions": open_questions_get(calibration_set=cset)
            if user_has_role(request.user, LEAD)
            else None,
            "progress": progress,
            "progress_own": own,
            "assignment_forms": assignment_forms or {},
        },
        status=status,
    )


@unstorable_shown_on_form
@require_POST
@role_required(*BUILDER_ROLES)
def calibration_set_instructions(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Save a new guidelines version (``calibration_set_instructions_set``). Refused: the set page
    with the error and the typed text, nothing saved (409 for a stale form, the current text
    shown).
    """
    cset = _set_or_404(set_id)
    form = CalibrationInstructionsForm(request.POST)
    if not form.is_valid():
        return _set_page(request, cset, instructions_form=form)
    try:
        calibration_set_instructions_set(
            calibration_set=cset,
            instructions=form.cleaned_data["instructions"],
            by=request.user,
            expected_version=form.cleaned_data["expected_version"],
        )
    except DomainError as exc:
        if exc.code != "conflict":
            form.add_error("instructions", f"Guidelines not saved: {exc}")
            return _set_page(request, cset, instructions_form=form)
        # A stale tab: the user's text kept, the form moved to the current version (saving
        # again replaces it deliberately), the current text shown beside it.
        data = request.POST.copy()
        data["expected_version"] = exc.extra["current_version"]
        kept = CalibrationInstructionsForm(data)
        kept.is_valid()
        kept.add_error(None, f"Guidelines not saved: {exc}.")
        cset.refresh_from_db()
        return _set_page(
            request,
            cset,
            instructions_form=kept,
            guidelines_conflict=exc.extra["current_text"],
            status=409,
        )
    messages.success(request, "Guidelines saved.")
    return redirect("labeling:set-detail", set_id=cset.uuid)


@require_POST
@role_required(*BUILDER_ROLES)
def calibration_set_top_up(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Add the items the set's plan asks for (``calibration_set_top_up``)."""
    cset = _set_or_404(set_id)
    try:
        added = calibration_sets.calibration_set_top_up(calibration_set=cset, by=request.user)
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"Added {added} item{'s' if added != 1 else ''}." if added else "Nothing to add.",
        )
    return redirect("labeling:set-detail", set_id=cset.uuid)


def _item_change(request: HtmxHttpRequest, set_id, *, add: bool) -> HttpResponse:
    cset = _set_or_404(set_id)
    form = CalibrationItemForm(request.POST)
    if not form.is_valid():
        if add:  # a typed uuid: shown again with the error (removing is a button)
            return _set_page(request, cset, item_form=form)
        messages.error(request, "trial: give a trial uuid.")
        return redirect("labeling:set-detail", set_id=cset.uuid)
    trial = Trial.objects.select_related("run").filter(uuid=form.cleaned_data["trial"]).first()
    if trial is None:
        if add:
            form.add_error("trial", f"trial {form.cleaned_data['trial']}: no such trial.")
            return _set_page(request, cset, item_form=form)
        messages.error(request, f"trial {form.cleaned_data['trial']}: no such trial.")
        return redirect("labeling:set-detail", set_id=cset.uuid)
    try:
        if add:
            calibration_sets.calibration_item_add(
                calibration_set=cset, trial=trial, by=request.user
            )
            messages.success(request, "Trial added.")
        else:
            removed = calibration_sets.calibration_item_remove(
                calibration_set=cset, trial=trial, by=request.user
            )
            messages.success(request, "Trial removed." if removed else "Trial was not in the set.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("labeling:set-detail", set_id=cset.uuid)


@unstorable_shown_on_form
@require_POST
@role_required(*BUILDER_ROLES)
def calibration_item_add(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Add a trial (POST ``trial=<uuid>``) until the set is frozen; refused: the set page with
    the error and the typed text.
    """
    return _item_change(request, set_id, add=True)


@require_POST
@role_required(*BUILDER_ROLES)
def calibration_item_remove(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Remove a trial (POST ``trial=<uuid>``) until the set is frozen."""
    return _item_change(request, set_id, add=False)
