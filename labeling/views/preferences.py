"""Preferences on pairwise judge runs."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from core.errors import DomainError
from core.forms import unstorable_shown_on_form
from core.http import HtmxHttpRequest, form_error, query_uuid, role_required
from core.roles import LEAD, REVIEWER
from evals.models import TrialPair
from judges.models import JudgeRun
from labeling import preferences
from labeling.forms import PreferenceLabelForm


@unstorable_shown_on_form
@require_http_methods(["GET", "POST"])
@role_required(REVIEWER, LEAD)
def preference_queue(request: HtmxHttpRequest, judge_run_id) -> HttpResponse:
    """Label a pairwise run's pairs one at a time, blind, each in its recorded order
    (``?pair=<uuid>``: that pair). POST by htmx (``static/js/labeling.js``); refused: the pair
    again with the error and the critique kept.
    """
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
