"""HTML views for runs: thin, they call selectors and services and render.

Anonymous visitors go to the login page; signed-in users without a role get 403 (outputs
and inputs are a team's data); viewers (``VIEWER_ROLES``) see every page; only engineers
and leads (``RUNNER_ROLES``) start or cancel a run."""

import json
from typing import Any

from django.contrib import messages
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from core.actors import Via
from core.errors import DomainError
from core.forms import unstorable_shown_on_form
from core.http import (
    RUNNER_ROLES,
    VIEWER_ROLES,
    HtmxHttpRequest,
    form_error,
    query_choice,
    query_object,
    query_page,
    role_required,
)
from core.roles import user_has_role
from evals import selectors
from evals.baselines import run_baseline_context
from evals.blindness import run_is_blind
from evals.forms import RUN_FILTER_STATUSES, BaselineSetForm, RunFilterForm, RunStartForm
from evals.grading.contract.decisions import decision_history, trial_decision_get
from evals.models import Case, Run, Suite, TopUp, Trial
from evals.report.selectors import run_report, run_report_state
from evals.reprice import run_reprices
from evals.run_like import run_like_initial, run_like_refusal
from evals.runner.finalize import run_cancel as run_cancel_service
from evals.runner.retry import run_retry as run_retry_service
from evals.runner.start import run_publish_warning, run_start
from evals.suites import suite_default_graders
from evals.target_shown import target_shown


@require_GET
@role_required(*VIEWER_ROLES)
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    """Runs, newest first, filtered by ``?suite=<uuid>&status=<status>``, 50 a page. A malformed
    parameter is a 400 naming it; a suite UUID naming no suite a 404 (``core.http``)."""
    suite = query_object(request, "suite", Suite.objects.all())
    status = query_choice(request, "status", RUN_FILTER_STATUSES)
    page = selectors.run_list(
        suite_uuid=str(suite.uuid) if suite else None,
        status=status or None,
        page=query_page(request),
        viewer=request.user,
    )
    filters = RunFilterForm(initial={"suite": suite, "status": status})
    context = {"page": page, "filters": filters, "filtered": bool(suite or status)}
    return render(request, "evals/run_list.html", context)


@require_GET
@role_required(*VIEWER_ROLES)
def run_detail(request: HttpRequest, run_id) -> HttpResponse:
    """The run page: progress, report, baseline card, top-ups."""
    run = get_object_or_404(Run.objects.select_related("suite", "cancelled_by"), uuid=run_id)
    return run_page(request, run)


def run_page(
    request: HttpRequest, run: Run, *, baseline_form: BaselineSetForm | None = None
) -> HttpResponse:
    """Render the run page; ``baseline_form``: a refused post's bound form, else a blank one."""
    top_ups = TopUp.objects.filter(Q(head=run) | Q(base=run)).select_related("head", "base")
    # Read before the report: a grade landing in between makes the next poll send the card.
    card_state = "" if run.is_terminal else run_report_state(run=run)
    return render(
        request,
        "evals/run_detail.html",
        {
            "run": run,
            "report": run_report(run=run),
            "target_rows": target_shown(run.target),
            "live": not run.is_terminal,  # "not graded yet", never "undefined", while it runs
            "card_state": card_state,
            "clone_refusal": run_like_refusal(run),
            "top_ups": list(top_ups[:20]),
            "reprices": run_reprices(run=run),
            "can_run": user_has_role(request.user, *RUNNER_ROLES),
            # A reviewer still labeling some of this run's trials sees no per-case rows,
            # slices or reasons (``evals.blindness.run_is_blind``).
            "blind_run": run_is_blind(request.user, run),
            "baseline_form": baseline_form or BaselineSetForm(),
            **run_baseline_context(run=run),
        },
    )


@unstorable_shown_on_form
@require_http_methods(["GET", "POST"])
@role_required(*RUNNER_ROLES)
def run_new(request: HtmxHttpRequest) -> HttpResponse:
    """Start a run. GET shows the form (``?suite=<uuid>`` prefills its grader set; ``?like=<run
    uuid>`` every field from that run, ``evals.run_like``; unknown: 404 naming the parameter,
    malformed: 400); POST calls ``run_start`` and redirects to the run page."""

    if request.method == "POST":
        form = RunStartForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                run = run_start(
                    suite=data["suite"],
                    name=data["name"],
                    target=data["target"],
                    graders=data["graders"],
                    trials_per_case=data["trials_per_case"],
                    source_version=data["source_version"],
                    started_by=request.user,
                    against=data.get("against"),
                )
            except DomainError as exc:
                form_error(form, exc)
            else:
                warning = run_publish_warning(run=run)
                if warning:
                    messages.warning(request, f"Run saved, not started yet: {warning}.")
                return redirect(run.get_absolute_url())
        return render(request, "evals/run_new.html", {"form": form})
    like = query_object(request, "like", Run.objects.select_related("suite"), noun="run")
    if like is not None:
        return _run_new_like(request, like)
    # ?suite=zzz is a 400 and an unknown suite a 404 naming it, never another suite's form.
    suite = query_object(request, "suite", Suite.objects.all())
    if suite is None:
        suite = Suite.objects.order_by("name").first()
    prefill = suite_default_graders(suite=suite) if suite else None
    graders = prefill.graders if prefill else []
    form = RunStartForm(initial={"suite": suite, "graders": json.dumps(graders, indent=2)})
    context = {"form": form, "prefill": prefill}
    if request.htmx and request.htmx.target == "graders-field":
        return render(request, "evals/run_new.html#graders-field", context)
    return render(request, "evals/run_new.html", context)


def _run_new_like(request: HtmxHttpRequest, like: Run) -> HttpResponse:
    """The start form filled from ``like`` (``evals.run_like``), or blank saying why not."""
    refusal = run_like_refusal(like)
    if refusal:
        form = RunStartForm(initial={"suite": like.suite})
        return render(
            request, "evals/run_new.html", {"form": form, "like": like, "like_refusal": refusal}
        )
    prefill = run_like_initial(like)
    form = RunStartForm(initial=prefill.initial)
    context = {"form": form, "like": like, "not_carried": prefill.not_carried}
    return render(request, "evals/run_new.html", context)


@require_GET
@role_required(*VIEWER_ROLES)
def run_progress(request: HtmxHttpRequest, run_id) -> HttpResponse:
    """The progress fragment, polled every 2 s (``?card=``: the state of the pass rate card
    shown, ``run_report_state``), with the card as it stands when that state changed (an
    out-of-band swap, unless the run is blind for the viewer); 286 (stop polling) once the run
    is terminal, with a one-shot fetch that swaps the final report (``#run-report``) in."""
    run = get_object_or_404(Run.objects.select_related("cancelled_by"), uuid=run_id)
    context = {"run": run, "finished_now": run.is_terminal}
    if not run.is_terminal:
        context["card_state"] = run_report_state(run=run)
    html = render_to_string("evals/fragments/run_progress.html", context, request=request)
    if run.is_terminal:
        return HttpResponseStopPolling(html)
    if not run_is_blind(request.user, run) and request.GET.get("card") != context["card_state"]:
        # The pass rate card follows the progress (an out-of-band swap of #run-live-report),
        # sent again only when the report may have changed since the card shown (``card``).
        live = {"run": run, "report": run_report(run=run), "live": True, "oob": True}
        html += render_to_string("evals/fragments/run_live_report.html", live, request=request)
    return HttpResponse(html)


@require_POST
@role_required(*RUNNER_ROLES)
def run_cancel(request: HtmxHttpRequest, run_id) -> HttpResponse:
    """Cancel a run (``run_cancel``); htmx gets the progress fragment, a form post a redirect."""

    run = get_object_or_404(Run, uuid=run_id)
    cancelled = run_cancel_service(run=run, by=request.user, via=Via.PAGE)  # refreshes ``run``
    if request.htmx:
        html = render_to_string("evals/fragments/run_progress.html", {"run": run}, request=request)
        return HttpResponseStopPolling(html) if run.is_terminal else HttpResponse(html)
    if cancelled:
        messages.success(request, "Run cancelled.")
    else:
        messages.info(request, f"Run is {run.status}; nothing to cancel.")
    return redirect(run.get_absolute_url())


@require_POST
@role_required(*RUNNER_ROLES)
def run_retry(request: HtmxHttpRequest, run_id) -> HttpResponse:
    """Retry the run's errored trials (``evals.runner.retry.run_retry``); back to the run."""
    run = get_object_or_404(Run, uuid=run_id)
    try:
        new = run_retry_service(run=run, by=request.user)
    except DomainError as exc:
        messages.error(request, f"Nothing retried: {exc}")
    else:
        messages.success(request, f"Retrying {len(new)} errored trial(s).")
        warning = run_publish_warning(run=run)
        if warning:
            messages.warning(request, f"Not started yet: {warning}.")
    return redirect(run.get_absolute_url())


@require_GET
@role_required(*VIEWER_ROLES)
def run_case(request: HtmxHttpRequest, run_id, case_id) -> HttpResponse:
    """One case within a run: content and trials as the user may see them (``evals.blindness``)."""
    try:
        run, case, trials = selectors.run_case_get(
            run_uuid=run_id, case_uuid=case_id, viewer=request.user
        )
    except (Run.DoesNotExist, Case.DoesNotExist) as exc:
        raise Http404("No such case in this run.") from exc
    return render(request, "evals/run_case.html", {"run": run, "case": case, "trials": trials})


@require_GET
@role_required(*VIEWER_ROLES)
def trial_detail(request: HtmxHttpRequest, trial_id) -> HttpResponse:
    """One trial: full output, raw response, grades and labels as the user may see them
    (``evals.blindness``), its contract decision and that decision's history."""
    try:
        trial = selectors.trial_get(trial_uuid=trial_id, viewer=request.user)
    except Trial.DoesNotExist as exc:
        raise Http404("No such trial.") from exc
    context: dict[str, Any] = {"trial": trial, "decision": None, "decision_history": []}
    if not trial.blind:  # the decision reads grades and labels: hidden like them
        context["decision"] = trial_decision_get(trial_id=trial.id)
        context["decision_history"] = decision_history(trial_ids=[trial.id]).get(trial.id, [])
    return render(request, "evals/trial_detail.html", context)
