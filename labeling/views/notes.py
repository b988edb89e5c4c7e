"""A note on a calibration item, posted from the queue page (``labeling.notes``): the thread
fragment back for htmx, the item again otherwise. Who reads which note: ``labeling.notes``."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.errors import DomainError
from core.forms import unstorable_shown_on_form
from core.http import HtmxHttpRequest, role_required
from core.ids import uuid_parse
from core.roles import LEAD, REVIEWER
from core.text import unstorable_replace
from labeling.models import CalibrationItem, CalibrationSet
from labeling.notes import item_note_add, item_notes_get


def notes_context(
    item: CalibrationItem, cset: CalibrationSet, user, *, error: str = "", text: str = ""
) -> dict:
    """The thread fragment's context: the notes ``user`` may read, the form's error and text."""
    return {
        "notes_item": item,
        "notes_set": cset,
        "notes": item_notes_get(item=item, user=user),
        "notes_error": error,
        "notes_text": text,
    }


@unstorable_shown_on_form
@require_POST
@role_required(REVIEWER, LEAD)
def item_note_save(request: HtmxHttpRequest, set_id) -> HttpResponse:
    """Add a note (``item_note_add``) to the item of ``trial`` (POST) in the set; 404 for a
    trial not in it. Refused: the thread with the error and the typed text (400; 200 for
    htmx), nothing saved."""
    trial_uuid = uuid_parse(request.POST.get("trial"))
    item = (
        CalibrationItem.objects.select_related("calibration_set", "trial")
        .filter(calibration_set__uuid=set_id, trial__uuid=trial_uuid)
        .first()
        if trial_uuid
        else None
    )
    if item is None:
        raise Http404("No such trial in this calibration set.")
    text = request.POST.get("text", "")
    item_url = (
        reverse("labeling:queue", kwargs={"set_id": item.calibration_set.uuid})
        + f"?trial={item.trial.uuid}"
    )
    try:
        item_note_add(item=item, author=request.user, text=text)
    except DomainError as exc:
        shown, _ = unstorable_replace(text)  # never echo U+0000 back: U+FFFD in its place
        context = notes_context(
            item, item.calibration_set, request.user, error=f"Not saved: {exc}.", text=shown
        )
        status = 200 if request.htmx else 400
        return render(request, "labeling/fragments/item_notes.html", context, status=status)
    if request.htmx:
        return render(
            request,
            "labeling/fragments/item_notes.html",
            notes_context(item, item.calibration_set, request.user),
        )
    messages.success(request, "Note saved.")
    return redirect(item_url)
