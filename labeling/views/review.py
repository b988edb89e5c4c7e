"""Sending a run's trials to a new review queue: the trials in review, or the disagreeing
agent trials."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.errors import DomainError
from core.http import HtmxHttpRequest, role_required
from core.roles import ENGINEER, LEAD
from evals.models import Run
from labeling.disagreements import disagreement_queue_create
from labeling.review import review_set_create


@require_POST
@role_required(ENGINEER, LEAD)
def review_start(request: HtmxHttpRequest, run_id) -> HttpResponse:
    """Send a run's trials in review to a new review queue (``review_set_create``) and show it;
    none: back to the run with the message.
    """
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
    """Send a run's disagreeing agent trials (all, a ``kind`` or a group's ``label``) to a
    review queue (``disagreement_queue_create``) and show it; none: back with the message.
    """
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
