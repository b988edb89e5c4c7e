"""Preferences on pairwise judge runs."""

from __future__ import annotations

from django.http import HttpResponse, QueryDict
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
    (``?pair=<uuid>``: that pair). POST by htmx (``static/js/labeling.js``), a compare-and-set
    on the form's ``expected_version``; refused: the pair again with the error, the choice and
    the critique kept (a stale form: 409, 200 for htmx).
    """
    judge_run = get_object_or_404(JudgeRun, uuid=judge_run_id, base_run__isnull=False)
    form, pair_id, saved, status = PreferenceLabelForm(), None, "", 200
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
                    expected_version=form.cleaned_data["expected_version"],
                )
            except DomainError as exc:
                if exc.code == "conflict":
                    form = _stale_form_kept(request.POST, exc)
                    status = 200 if request.htmx else 409
                else:
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
    # The version the form carries: the posted one when it parsed (a stale tab stays stale
    # until it is moved to the current one), else the reviewer's preference's now.
    cleaned = getattr(form, "cleaned_data", {})
    expected_version = cleaned.get("expected_version", state.version)
    context = {
        "judge_run": judge_run,
        "state": state,
        "form": form,
        "saved": saved,
        "expected_version": state.version if expected_version is None else expected_version,
    }
    return render(request, "labeling/preferences.html", context, status=status)


def _stale_form_kept(posted: QueryDict, exc: DomainError) -> PreferenceLabelForm:
    """A stale tab's form from its ``posted`` data: the choice and critique kept, moved to the
    current version (saving again replaces the preference deliberately), the refusal on
    ``expected_version``.
    """
    data = posted.copy()
    data["expected_version"] = str(exc.extra["current_version"])
    kept = PreferenceLabelForm(data)
    kept.is_valid()
    kept.add_error(
        "expected_version",
        f"Not saved: {exc}. Your choice is kept below; save again to replace the current "
        "preference.",
    )
    return kept
