"""The reviewer's queue: one item at a time, saving a label or a review, undoing the
last label. Blind: it never shows a grade, a judge verdict or another reviewer's label."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.errors import DomainError
from core.forms import unstorable_shown_on_form
from core.http import HtmxHttpRequest, query_uuid, role_required
from core.ids import uuid_parse
from core.roles import LEAD, REVIEWER
from evals.grading.contract.decisions import output_hash
from evals.models import Trial
from labeling import labels
from labeling import selectors as calibration_selectors
from labeling.forms import LabelForm, ReviewForm
from labeling.models import Label
from labeling.queue import QueueState, queue_last_labeled_get, queue_state_get
from labeling.review import review_dimensions, review_submit
from labeling.views._common import _set_or_404
from labeling.views.notes import notes_context

LABELER_ROLES = (REVIEWER, LEAD)


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
    """Render the queue page (the item fragment for htmx); ``form``/``review_form``: a refused
    post's bound form.
    """
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
    if state.current is not None:  # the item's thread, as this user may read it
        context.update(notes_context(state.current.item, state.calibration_set, request.user))
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
    """The queue: ``?trial=<uuid>`` shows that item, else this reviewer's first unlabeled one."""
    cset = _set_or_404(set_id)
    state = queue_state_get(
        calibration_set=cset, reviewer=request.user, trial_uuid=_trial_param(request)
    )
    return _queue_render(request, state)


@unstorable_shown_on_form
@require_POST
@role_required(*LABELER_ROLES)
def label_save(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Save the label (``label_submit``), then the next item; stale or invalid: the same item,
    input kept (409/400; 200 for htmx), ``expected_version`` moved to the current one.
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
        label = labels.label_submit(
            trial=trial,
            reviewer=request.user,
            verdict=data["verdict"],
            critique=data["critique"],
            expected_version=data["expected_version"],
            calibration_set=cset,
        )
    except DomainError as exc:
        state = queue_state_get(calibration_set=cset, reviewer=request.user, trial_uuid=trial_uuid)
        if exc.field == "trial":  # assigned to others meanwhile: their next item, fresh form
            status = 200 if request.htmx else 409
            return _queue_render(request, state, error=f"Not saved: {exc}.", status=status)
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
    assert revision is not None  # a "flagged" outcome comes with its revision
    return (
        f"Your label of record stays {label.verdict}: you had finished this set, so the "
        f"judge's verdicts were visible to you. Your {revision.verdict} is recorded as a "
        "revision after seeing them, flagged and counted apart in calibration."
    )


@unstorable_shown_on_form
@require_POST
@role_required(*LABELER_ROLES)
def review_save(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Save a review (``review_submit``), then the next item; refused: the same item with the
    error and the input, nothing saved.
    """
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
@role_required(*LABELER_ROLES)
def label_undo(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Undo this reviewer's last label in the set (``label_undo``) and show that item again."""
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
        labels.label_undo(trial=trial, reviewer=request.user)
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
