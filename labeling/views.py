"""HTML views for calibration sets and the reviewer's labeling queue: thin, they call
``labeling.services`` / selectors and render.

Permissions (the cast in tests/conftest.py; the services check the same roles again):
- calibration sets, list and detail: every role (``VIEWER_ROLES``); the detail shows the
  trials and how many reviewers labeled each, never verdicts, so a reviewer stays blind;
- building a set, adding/removing items and editing its guidelines for reviewers
  (Markdown, shown in the queue): engineers and leads;
- the queue, saving and undoing labels: reviewers and leads (``LABELER_ROLES``); engineers
  and outsiders get 403 (the domain's ``label_submit`` allows the same two roles);
- adjudication (trials where reviewers disagree, and the decision): leads only, since the
  page shows every reviewer's verdict (``adjudication_record`` checks the same role);
- improving a judge with few-shot examples (``judge_improve``): leads only, as
  ``labeling.improve.judge_version_improve`` (it shows every reviewer's critique and
  chooses what a judge is taught); versions side by side: engineers and leads.
The queue is blind: it never shows a grade, a judge verdict or another reviewer's label.
"""

from __future__ import annotations

import dataclasses

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.db.models import Count
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import DomainError
from core.forms import unstorable_shown_on_form
from core.http import (
    VIEWER_ROLES,
    HtmxHttpRequest,
    form_error,
    query_object,
    query_uuid,
    role_required,
)
from core.ids import uuid_parse
from core.roles import ENGINEER, LEAD, REVIEWER, user_has_role
from evals.grading.contract.decisions import output_hash
from evals.models import Run, Suite, Trial, TrialPair
from judges import trust
from judges.models import Judge, JudgeRun, JudgeVersion
from labeling import adjudication, improve, preferences, services
from labeling import selectors as calibration_selectors
from labeling import services as labeling_services
from labeling.adjudication import human_disagreements
from labeling.disagreements import disagreement_queue_create
from labeling.figures import Confusion
from labeling.forms import (
    AdjudicationForm,
    CalibrationInstructionsForm,
    CalibrationItemForm,
    CalibrationSetBuildForm,
    JudgeImproveForm,
    LabelForm,
    PairwiseTrustApproveForm,
    PreferenceLabelForm,
    ReviewForm,
    TrustApproveForm,
    TrustRevokeForm,
)
from labeling.guidelines import guidelines_versions_get
from labeling.models import CalibrationSet, Label
from labeling.pairwise import is_pairwise
from labeling.queue import QueueState, queue_last_labeled_get, queue_state_get
from labeling.review import review_dimensions, review_set_create, review_submit
from labeling.sampling import set_plan_get

LABELER_ROLES = (REVIEWER, LEAD)
BUILDER_ROLES = (ENGINEER, LEAD)


def _set_or_404(set_id) -> CalibrationSet:
    return get_object_or_404(
        CalibrationSet.objects.select_related("suite", "run", "judge_version__judge"), uuid=set_id
    )


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
    """Build a calibration set (``calibration_set_build``); GET ``?run=<uuid>`` and
    ``?judge_version=<uuid>`` prefill the form."""
    if request.method == "POST":
        form = CalibrationSetBuildForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                cset = services.calibration_set_build(
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
    initial = {"size": 30, "seed": 0}
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
    status: int = 200,
) -> HttpResponse:
    """Render the set page; ``instructions_form`` is the guidelines form (a refused post's
    bound form, shown open with its errors and the typed text), else one holding the saved
    guidelines; ``item_form`` likewise the "add a trial" form, else a blank one;
    ``guidelines_conflict`` the current guidelines a stale form was refused over."""
    items = (
        cset.items.select_related("trial__case", "trial__run")
        .annotate(n_labels=Count("trial__labels"))
        .order_by("position", "id")
    )
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
            "items": items,
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
        },
        status=status,
    )


@unstorable_shown_on_form
@require_POST
@role_required(*BUILDER_ROLES)
def calibration_set_instructions(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Save a new version of the set's guidelines for reviewers
    (``calibration_set_instructions_set``, a compare-and-set on the version the form
    carries); back to the set page. Refused (too long, or text the database cannot store):
    the set page again with the error on the guidelines and the typed text kept, nothing
    saved. A stale form (another tab saved since): 409, the set page with the current
    guidelines shown and the typed text kept in the form, nothing saved."""
    cset = _set_or_404(set_id)
    form = CalibrationInstructionsForm(request.POST)
    if not form.is_valid():
        return _set_page(request, cset, instructions_form=form)
    try:
        services.calibration_set_instructions_set(
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
        added = services.calibration_set_top_up(calibration_set=cset, by=request.user)
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
            services.calibration_item_add(calibration_set=cset, trial=trial, by=request.user)
            messages.success(request, "Trial added.")
        else:
            removed = services.calibration_item_remove(
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
    """Add a trial (POST ``trial=<uuid>``, typed) until the set is frozen; a refused uuid
    (malformed, no such trial, or text the database cannot store) shows the set page again
    with the error on the field and the typed text kept."""
    return _item_change(request, set_id, add=True)


@require_POST
@role_required(*BUILDER_ROLES)
def calibration_item_remove(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Remove a trial (POST ``trial=<uuid>``) until the set is frozen."""
    return _item_change(request, set_id, add=False)


def _label_form(state: QueueState) -> LabelForm | None:
    current = state.current
    if current is None:
        return None
    label: Label | None = current.label
    return LabelForm(
        initial={
            "trial": current.item.trial.uuid,
            "verdict": label.verdict if label else None,
            "critique": label.critique if label else "",
            "expected_version": current.version,
        }
    )


def _queue_render(
    request: HtmxHttpRequest,
    state: QueueState,
    *,
    form: LabelForm | None = None,
    review_form: ReviewForm | None = None,
    error: str = "",
    saved: str = "",
    status: int = 200,
) -> HttpResponse:
    """Render the queue page (its item fragment for htmx); ``form`` / ``review_form`` a
    refused post's bound form, shown with its errors and what was typed."""
    dimensions = review_dimensions(state.calibration_set)
    context = {
        "cset": state.calibration_set,
        "state": state,
        "form": form or _label_form(state),
        "error": error,
        "saved": saved,
        # A review queue (labeling.review): one pass/fail and critique per dimension,
        # tied to the hash of the output shown.
        "dimensions": dimensions,
        "review_form": review_form or ReviewForm(dimensions=dimensions),
        "output_hash": output_hash(state.current.item.trial.output) if state.current else "",
    }
    template = "labeling/queue.html"
    if request.htmx and not request.htmx.history_restore_request:
        template = "labeling/queue.html#queue-item"
    return render(request, template, context, status=status)


def _trial_param(request: HtmxHttpRequest) -> str | None:
    value = query_uuid(request, "trial")  # ?trial=zzz is a 400, not a silent resume
    return None if value is None else str(value)


@require_GET
@role_required(*LABELER_ROLES)
def queue(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """The labeling queue: one item at a time. ``?trial=<uuid>`` shows that item; without
    it the queue resumes at this reviewer's first unlabeled item."""
    cset = _set_or_404(set_id)
    state = queue_state_get(
        calibration_set=cset, reviewer=request.user, trial_uuid=_trial_param(request)
    )
    return _queue_render(request, state)


@unstorable_shown_on_form
@require_POST
@role_required(*LABELER_ROLES)
def label_save(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Save the label (``label_submit``) and show the next unlabeled item.

    htmx gets the next item's fragment; a plain form post a redirect. A stale form (the
    label changed since the item was loaded) or an invalid one re-renders the same item
    with the message and the reviewer's input kept (409 / 400 without htmx; 200 with htmx,
    which swaps only 2xx responses), its ``expected_version`` moved to the current label so
    saving again overwrites deliberately.
    """
    form = LabelForm(request.POST)
    trial_uuid = uuid_parse(request.POST.get("trial"))  # malformed: no such trial (404)
    if form.is_valid():
        trial_uuid = form.cleaned_data["trial"]
    # The set and the trial in one query; the trial's output is never loaded here.
    item = (
        calibration_selectors.calibration_item_get(set_id=set_id, trial_uuid=trial_uuid)
        if trial_uuid
        else None
    )
    if item is None:
        raise Http404("No such trial in this calibration set.")
    cset, trial = item.calibration_set, item.trial
    if not form.is_valid():
        state = queue_state_get(calibration_set=cset, reviewer=request.user, trial_uuid=trial_uuid)
        return _queue_render(
            request,
            state,
            form=form,
            error="Nothing was saved.",
            status=200 if request.htmx else 400,
        )
    data = form.cleaned_data
    try:
        label = services.label_submit(
            trial=trial,
            reviewer=request.user,
            verdict=data["verdict"],
            critique=data["critique"],
            expected_version=data["expected_version"],
            calibration_set=cset,
        )
    except DomainError as exc:
        state = queue_state_get(calibration_set=cset, reviewer=request.user, trial_uuid=trial_uuid)
        current = state.current.label if state.current else None
        kept = LabelForm(
            initial={
                "trial": trial.uuid,
                "verdict": data["verdict"],
                "critique": data["critique"],
                "expected_version": state.current.version if state.current else 0,
            }
        )
        stale = isinstance(exc, DomainError)
        message = (
            f"Not saved: {exc}. Your input is kept below; save again to replace the "
            f"current label" + (f" ({current.verdict})." if current else ".")
            if stale
            else f"Not saved: {exc}."
        )
        return _queue_render(
            request,
            state,
            form=kept,
            error=message,
            status=200 if request.htmx else (409 if stale else 400),
        )
    if not request.htmx:
        if label.outcome == "flagged":
            messages.warning(request, _flagged_text(label))
        return redirect(reverse("labeling:queue", kwargs={"set_id": cset.uuid}))
    state = queue_state_get(calibration_set=cset, reviewer=request.user, after_uuid=trial_uuid)
    if label.outcome == "flagged":
        return _queue_render(request, state, saved=_flagged_text(label))
    return _queue_render(request, state, saved=f"Saved {data['verdict']}.")


def _flagged_text(label: Label) -> str:
    revision = label.flagged_revision
    return (
        f"Your label of record stays {label.verdict}: you had finished this set, so the "
        f"judge's verdicts were visible to you. Your {revision.verdict} is recorded as a "
        "revision after seeing them, flagged and counted apart in calibration."
    )


@unstorable_shown_on_form
@require_POST
@role_required(*LABELER_ROLES)
def review_save(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Save a review (``labeling.review.review_submit``): every dimension pass or fail with
    a critique, tied to the output hash the form was shown with; then the next item. A
    refused review (text the database cannot store, or an answer the service refuses)
    re-renders the same item with the error and what was typed (nothing saved)."""
    cset = _set_or_404(set_id)
    form = ReviewForm(request.POST, dimensions=review_dimensions(cset))
    trial_uuid = uuid_parse(form.data.get("trial"))
    trial = (
        Trial.objects.filter(uuid=trial_uuid, calibration_items__calibration_set=cset).first()
        if trial_uuid
        else None
    )
    if trial is None:
        raise Http404("No such trial in this review queue.")
    if not form.is_valid():
        state = queue_state_get(
            calibration_set=cset, reviewer=request.user, trial_uuid=str(trial.uuid)
        )
        return _queue_render(request, state, review_form=form)
    try:
        label = review_submit(
            calibration_set=cset,
            trial=trial,
            reviewer=request.user,
            dimensions=form.answers(),
            reviewed_hash=form.cleaned_data["output_hash"],
        )
    except DomainError as exc:
        state = queue_state_get(
            calibration_set=cset, reviewer=request.user, trial_uuid=str(trial.uuid)
        )
        return _queue_render(
            request,
            state,
            review_form=form,
            error=f"Not saved: {exc}.",
            status=200 if request.htmx else (409 if exc.code == "conflict" else 400),
        )
    if not request.htmx:
        if label.outcome == "flagged":
            messages.warning(request, _flagged_text(label))
        return redirect(reverse("labeling:queue", kwargs={"set_id": cset.uuid}))
    state = queue_state_get(calibration_set=cset, reviewer=request.user, after_uuid=str(trial.uuid))
    saved = _flagged_text(label) if label.outcome == "flagged" else "Review saved."
    return _queue_render(request, state, saved=saved)


@require_POST
@role_required(ENGINEER, LEAD)
def review_start(request: HtmxHttpRequest, run_id) -> HttpResponse:
    """Send a run's trials in review to a new review queue (``review_set_create``), then
    show the queue's page (reviewers and leads label from there); a run with none goes back
    to its page with the message."""
    run = get_object_or_404(Run, uuid=run_id)
    try:
        cset = review_set_create(run=run, by=request.user)
    except DomainError as exc:
        messages.error(request, str(exc))
        return redirect(run.get_absolute_url())
    messages.success(request, f"Review queue {cset.name!r}: {cset.size} trials to review.")
    return redirect(reverse("labeling:set-detail", kwargs={"set_id": cset.uuid}))


@require_POST
@role_required(ENGINEER, LEAD)
def disagreements_review(request: HtmxHttpRequest, run_id) -> HttpResponse:
    """Send a run's disagreeing agent trials (all, one ``kind`` or one group: POST ``kind``,
    ``label``) to a new review queue (``disagreement_queue_create``), then show the queue's
    page; nothing to send goes back to the run page with the message."""
    run = get_object_or_404(Run, uuid=run_id)
    try:
        cset, created = disagreement_queue_create(
            run=run,
            by=request.user,
            kind=request.POST.get("kind", ""),
            label=request.POST.get("label", ""),
        )
    except DomainError as exc:
        messages.error(request, str(exc))
        return redirect(run.get_absolute_url())
    if created:
        messages.success(request, f"Review queue {cset.name!r}: {cset.size} trials to review.")
    else:
        messages.info(
            request,
            f"These {cset.size} trials are already in review queue {cset.name!r}: "
            "no second queue was made.",
        )
    return redirect(reverse("labeling:set-detail", kwargs={"set_id": cset.uuid}))


@require_POST
@role_required(*LABELER_ROLES)
def label_undo(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Undo this reviewer's last saved label in the set (``label_undo``) and show that
    item again (unlabeled, or at its previous revision)."""
    cset = _set_or_404(set_id)
    last = queue_last_labeled_get(calibration_set=cset, reviewer=request.user)
    if last is None:
        state = queue_state_get(
            calibration_set=cset,
            reviewer=request.user,
            trial_uuid=request.POST.get("trial") or None,
        )
        return _queue_render(request, state, error="Nothing to undo.")
    trial = last.trial
    try:
        services.label_undo(trial=trial, reviewer=request.user)
    except DomainError as exc:
        state = queue_state_get(
            calibration_set=cset, reviewer=request.user, trial_uuid=str(trial.uuid)
        )
        return _queue_render(
            request,
            state,
            error=f"Not undone: {exc}.",
            status=200 if request.htmx else 409,
        )
    if not request.htmx:
        return redirect(
            reverse("labeling:queue", kwargs={"set_id": cset.uuid}) + f"?trial={trial.uuid}"
        )
    state = queue_state_get(calibration_set=cset, reviewer=request.user, trial_uuid=str(trial.uuid))
    return _queue_render(request, state, saved=f"Undid your last label (case {trial.case.key}).")


def _adjudication_scope(request: HtmxHttpRequest, data) -> tuple[CalibrationSet | None, object]:
    """``set=<uuid>`` or ``suite=<uuid>`` (neither: every trial); 404 for an unknown one,
    400 for a value that is no UUID (``?set=zzz``)."""

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
    """Trials where reviewers disagree (``?set=<uuid>``, ``?suite=<uuid>`` or everywhere),
    each with every reviewer's verdict and critique and a form for the lead's decision."""
    cset, suite = _adjudication_scope(request, request.GET)
    return _adjudication_render(request, cset, suite)


@unstorable_shown_on_form
@require_POST
@role_required(LEAD)
def adjudication_save(request: HtmxHttpRequest) -> HttpResponse:
    """Record the lead's decision (``adjudication_record``); it becomes the trial's
    reference label. An invalid form re-renders the page with the errors beside that trial
    and the input kept (400); a form that showed an older decision than the trial's newest
    re-renders the page with that decision, the refusal and the lead's choice and reason
    kept, the form now on the newest version (409)."""
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
    messages.success(
        request,
        f"Decided {form.cleaned_data['verdict']} on case "
        f"{trial.case.key} (attempt {trial.attempt}).",
    )
    query = f"?set={cset.uuid}" if cset else (f"?suite={suite.uuid}" if suite else "")
    return redirect(reverse("labeling:adjudication") + query)


CALIBRATION_ROLES = (ENGINEER, LEAD)


def _version_or_404(version_id) -> JudgeVersion:
    return get_object_or_404(JudgeVersion.objects.select_related("judge"), uuid=version_id)


def _scope(request: HtmxHttpRequest) -> tuple[CalibrationSet | None, Suite | None]:
    """``?set=<uuid>`` or ``?suite=<uuid>``: 404 naming it when unknown, 400 when not a
    UUID."""
    sets = CalibrationSet.objects.select_related("suite", "run")
    cset = query_object(request, "set", sets, noun="calibration set")
    suite = None if cset is not None else query_object(request, "suite", Suite.objects.all())
    return cset, suite


@require_GET
@role_required(*CALIBRATION_ROLES)
def calibration(request: HtmxHttpRequest, version_id) -> HttpResponse:
    """A judge version's calibration: ``?set=<uuid>`` on a calibration set, ``?suite=<uuid>``
    over every labeled trial of a suite, neither: over every labeled trial.

    Pointwise judges: ``calibration_compute`` and ``human_agreement`` (the ceiling);
    pairwise judges: ``pairwise_calibration_compute`` (set scope uses the set's suite).
    "Mark trusted" is offered on the set and all-trials scopes, which are what
    ``judge_trust_approve`` records; a suite scope links to the all-trials scope.
    """
    version = _version_or_404(version_id)
    cset, suite = _scope(request)
    return _calibration_page(request, version, cset=cset, suite=suite)


def _calibration_page(
    request: HtmxHttpRequest,
    version: JudgeVersion,
    *,
    cset: CalibrationSet | None,
    suite: Suite | None,
    revoke_form: TrustRevokeForm | None = None,
) -> HttpResponse:
    """Render the calibration page of ``version`` on its scope; ``revoke_form`` is a refused
    revocation's bound form (its errors and the typed reason shown), a blank one by default."""
    approval = trust.active_approval_get(judge_version=version)
    context = {
        "version": version,
        "cset": cset,
        "suite": suite,
        "approval": approval,
        "is_lead": user_has_role(request.user, LEAD),
        "history": version.approvals.select_related("approved_by", "revoked_by")[:10],
        "trusted_siblings": [
            v for v in version.judge.versions.all() if v.id != version.id and v.is_trusted
        ],
        "sets": CalibrationSet.objects.filter(judge_version=version),
        "revoke_form": revoke_form
        or TrustRevokeForm(initial={"approval": approval.uuid if approval else None}),
        "n_development_total": improve.development_count(judge_version=version),
        "improvable": version.judge.kind in improve.IMPROVABLE_KINDS,
    }
    # Figures an approval was granted on must have held the development trials out; any
    # other approval's figures are not shown as "trusted" figures (trust_grant refuses them).
    context["approval_on_development"] = bool(
        approval
        and context["n_development_total"]
        and approval.figures.get("n_development_total") != context["n_development_total"]
    )
    if is_pairwise(version):
        scope_suite = suite or (cset.suite if cset else None)
        pairwise = calibration_selectors.pairwise_calibration_compute(
            judge_version=version, suite=scope_suite
        )
        context["pairwise"], context["scope_suite"] = pairwise, scope_suite
        context["approve_form"] = PairwiseTrustApproveForm(
            initial={
                "suite": scope_suite.uuid if scope_suite else None,
                "n": pairwise.n,
                "agreement_numerator": pairwise.agreement_numerator,
                "n_inconsistent": pairwise.n_inconsistent,
                "n_judge_errors": pairwise.n_judge_errors,
                "n_unresolved": pairwise.n_unresolved,
            }
        )
        return render(request, "labeling/calibration.html", context)
    figures = calibration_selectors.calibration_compute(
        judge_version=version, calibration_set=cset, suite=suite
    )
    ceiling = calibration_selectors.human_agreement(calibration_set=cset, suite=suite)
    revised, by_guidelines = calibration_selectors.calibration_label_notes(
        judge_version=version, calibration_set=cset, suite=suite
    )
    context.update(
        {
            "revised": revised,
            "by_guidelines": by_guidelines,
            "cal": figures,
            "ceiling": ceiling,
            "approve_form": TrustApproveForm(
                initial={
                    "calibration_set": cset.uuid if cset else None,
                    "n": figures.n,
                    "n_judge_errors": figures.n_judge_errors,
                    **dataclasses.asdict(figures.confusion),
                }
            ),
            "can_approve_scope": suite is None,
        }
    )
    return render(request, "labeling/calibration.html", context)


def _calibration_url(version: JudgeVersion, cset: CalibrationSet | None) -> str:
    url = reverse("labeling:calibration", kwargs={"version_id": version.uuid})
    return f"{url}?set={cset.uuid}" if cset else url


@require_POST
@role_required(LEAD)
def trust_approve(request: HtmxHttpRequest, version_id) -> HttpResponse:
    """Mark the version trusted (``judge_trust_approve``) on the scope and figures the lead
    saw; the service recomputes them and refuses when the thresholds fail or they changed."""
    version = _version_or_404(version_id)
    if is_pairwise(version):
        return _pairwise_trust_approve(request, version)
    form = TrustApproveForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not approved: the form was incomplete; reload the page.")
        return redirect(_calibration_url(version, None))
    data = form.cleaned_data
    cset = (
        get_object_or_404(CalibrationSet, uuid=data["calibration_set"])
        if data["calibration_set"]
        else None
    )
    current = calibration_selectors.calibration_compute(judge_version=version, calibration_set=cset)
    shown = dataclasses.replace(
        current,
        n=data["n"],
        n_judge_errors=data["n_judge_errors"],
        confusion=Confusion(**{f.name: data[f.name] for f in dataclasses.fields(Confusion)}),
    )
    try:
        labeling_services.judge_trust_approve(
            judge_version=version, by=request.user, calibration_set=cset, figures=shown
        )
    except DomainError as exc:
        messages.error(request, f"Not approved: {exc}.")
    else:
        messages.success(request, f"{version} is trusted.")
    return redirect(_calibration_url(version, cset))


def _pairwise_trust_approve(request: HtmxHttpRequest, version: JudgeVersion) -> HttpResponse:
    form = PairwiseTrustApproveForm(request.POST)
    url = reverse("labeling:calibration", kwargs={"version_id": version.uuid})
    if not form.is_valid():
        messages.error(request, "Not approved: the form was incomplete; reload the page.")
        return redirect(url)
    data = form.cleaned_data
    suite = get_object_or_404(Suite, uuid=data["suite"]) if data["suite"] else None
    if suite is not None:
        url = f"{url}?suite={suite.uuid}"
    current = calibration_selectors.pairwise_calibration_compute(judge_version=version, suite=suite)
    shown = dataclasses.replace(current, **{k: v for k, v in data.items() if k != "suite"})
    try:
        labeling_services.judge_trust_approve(
            judge_version=version, by=request.user, suite=suite, figures=shown
        )
    except DomainError as exc:
        messages.error(request, f"Not approved: {exc}.")
    else:
        messages.success(request, f"{version} is trusted.")
    return redirect(url)


@unstorable_shown_on_form
@require_POST
@role_required(LEAD)
def trust_revoke(request: HtmxHttpRequest, version_id) -> HttpResponse:
    """Revoke the approval the page showed (``judges.trust.trust_revoke``); a reason is
    required. A refused reason (missing, too long, or text the database cannot store) shows
    the calibration page again with the error on the reason and the typed text kept; an
    approval that is no longer the active one (revoked, a newer one granted) shows the page
    with the approval now, the refusal and the reason kept, the form on that approval (409);
    nothing is revoked."""
    version = _version_or_404(version_id)
    form = TrustRevokeForm(request.POST)
    back = form.data.get("set") or ""
    sets = CalibrationSet.objects.select_related("suite", "run")
    cset = sets.filter(uuid=back).first() if uuid_parse(back) else None
    if not form.is_valid():
        return _calibration_page(request, version, cset=cset, suite=None, revoke_form=form)
    try:
        trust.trust_revoke(
            judge_version=version,
            by=request.user,
            reason=form.cleaned_data["reason"],
            approval_uuid=form.cleaned_data["approval"],
        )
    except DomainError as exc:
        if exc.field != "approval" or exc.extra["current_approval"] is None:
            messages.error(request, f"Not revoked: {exc}.")
            return redirect(_calibration_url(version, cset))
        data = request.POST.copy()  # the form moves to the approval now, the reason kept
        data["approval"] = exc.extra["current_approval"]
        form = TrustRevokeForm(data)
        form.is_valid()
        form_error(form, exc)
        page = _calibration_page(request, version, cset=cset, suite=None, revoke_form=form)
        page.status_code = 409
        return page
    else:
        messages.success(request, f"Trust in {version} revoked.")
    return redirect(_calibration_url(version, cset))


# --- the improvement loop: few-shot examples from disagreements, versions compared ----------


@unstorable_shown_on_form
@require_http_methods(["GET", "POST"])
@role_required(LEAD)
def judge_improve(request: HtmxHttpRequest, version_id) -> HttpResponse:
    """Build an improved version of a judge (leads only, as ``judge_version_improve``):
    ``?set=<uuid>`` lists that set's disagreements (else every labeled trial's) with their
    critiques; the lead ticks examples, edits the prompt, previews it (``improve_preview``)
    and creates the version, then lands on its calibration page."""
    version = _version_or_404(version_id)
    cset, _suite = _scope(request)
    cal, candidates = improve.improve_candidates(base_version=version, calibration_set=cset)
    choices = [(c.choice, c.disagreement.case_key) for c in candidates]
    context = {
        "version": version,
        "cset": cset,
        "cal": cal,
        "candidates": candidates,
        "improvable": version.judge.kind in improve.IMPROVABLE_KINDS,
        "inherited": len(version.params.get("examples") or []),
    }
    if request.method == "GET":
        form = JudgeImproveForm(
            choices=choices,
            initial={"prompt_template": improve.improved_template_default(base_version=version)},
        )
        return render(request, "labeling/judge_improve.html", {**context, "form": form})
    form = JudgeImproveForm(request.POST, choices=choices)
    status = 400
    if form.is_valid():
        args = {
            "base_version": version,
            "label_ids": form.label_ids(),
            "prompt_template": form.cleaned_data["prompt_template"],
        }
        try:
            if form.cleaned_data["action"] == "preview":
                context["preview"] = improve.improve_preview(**args)
                status = 200
            else:
                new = improve.judge_version_improve(**args, by=request.user)
                messages.success(
                    request,
                    f"Created {new}: {len(args['label_ids'])} chosen label(s) recorded as its "
                    "development data; its calibration uses held-out labels only.",
                )
                return redirect(_calibration_url(new, cset))
        except DomainError as exc:
            if exc.field == "label_ids":
                form.add_error("examples", str(exc))
            else:
                form_error(form, exc)
    return render(request, "labeling/judge_improve.html", {**context, "form": form}, status=status)


@require_GET
@role_required(*CALIBRATION_ROLES)
def judge_versions_compare(request: HtmxHttpRequest, judge_id) -> HttpResponse:
    """A judge's versions side by side (``versions_compare``): agreement, kappa and FAR with
    their intervals on the same held-out items."""
    judge = get_object_or_404(Judge, uuid=judge_id)
    comparison = improve.versions_compare(judge=judge)
    return render(request, "labeling/judge_versions_compare.html", {"cmp": comparison})


# --- preferences on pairwise judge runs -------------------------------------------------------


@unstorable_shown_on_form
@require_http_methods(["GET", "POST"])
@role_required(REVIEWER, LEAD)
def preference_queue(request: HtmxHttpRequest, judge_run_id) -> HttpResponse:
    """Label preferences on a pairwise judge run's pairs, one at a time, keyboard-first
    (``a`` / ``b`` / ``t``, ``c`` critique, ``Enter`` save and next), blind to the judge
    and to which run each response came from: each pair in its recorded order
    (``labeling.preferences``). ``?pair=<uuid>`` shows that pair of the run (the way back
    after a login). POST (htmx, like the pass/fail queue, so an expired session's 401 keeps
    the choice and critique in the tab: ``static/js/labeling.js``) saves, then on to the
    next pair; a refused form (no choice, or text the database cannot store) shows the same
    pair again with the error on the field and the typed critique kept, nothing saved."""
    judge_run = get_object_or_404(JudgeRun, uuid=judge_run_id, base_run__isnull=False)
    form, pair_id, saved = PreferenceLabelForm(), None, ""
    if request.method == "POST":
        form = PreferenceLabelForm(request.POST)
        if form.is_valid():
            try:
                preferences.preference_label_save(
                    judge_run=judge_run,
                    pair_id=form.cleaned_data["pair"],
                    reviewer=request.user,
                    preferred=form.cleaned_data["verdict"],
                    critique=form.cleaned_data["critique"],
                )
            except DomainError as exc:
                form_error(form, exc)
            else:
                if not request.htmx:
                    return redirect("labeling:preferences", judge_run_id=judge_run.uuid)
                form, saved = PreferenceLabelForm(), "Saved."
        if form.errors:
            pair_id = form.cleaned_data.get("pair")
    else:
        shown = query_uuid(request, "pair")
        if shown is not None:
            pair_id = (
                TrialPair.objects.filter(uuid=shown, id__in=list(judge_run.trial_ids))
                .values_list("id", flat=True)
                .first()
            )
    state = preferences.preference_queue_get(
        judge_run=judge_run, reviewer=request.user, pair_id=pair_id
    )
    context = {"judge_run": judge_run, "state": state, "form": form, "saved": saved}
    return render(request, "labeling/preferences.html", context)
