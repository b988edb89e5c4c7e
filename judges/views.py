"""HTML views for judges: the list, new versions, a version's page (cost, judge runs,
probes), judge runs with progress and cancel. Calibration and approval live in
``labeling.views``. Engineers and leads only: reviewers label blind and get 403.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from core.actors import Via
from core.errors import DomainError
from core.forms import unstorable_shown_on_form
from core.http import HtmxHttpRequest, form_error, query_object, role_required
from core.roles import ENGINEER, LEAD
from judges import probes, runs, selectors, versions
from judges.forms import JudgeRunForm, JudgeVersionForm, PairwiseJudgeRunForm
from judges.models import JudgeRun, JudgeVersion, ProbeRun

VERSION_ROLES = (ENGINEER, LEAD)
POLLED_PARTS = ("probe-report", "judge-runs")


def _version_or_404(version_id) -> JudgeVersion:
    return get_object_or_404(JudgeVersion.objects.select_related("judge"), uuid=version_id)


@require_GET
@role_required(*VERSION_ROLES)
def judge_list(request: HtmxHttpRequest) -> HttpResponse:
    """Judges and their versions with trust, cost, position bias and calibration links."""
    rows = [
        {"judge": judge, "versions": versions} for judge, versions in selectors.judge_list_get()
    ]
    return render(request, "judges/judge_list.html", {"rows": rows})


@unstorable_shown_on_form
@require_http_methods(["GET", "POST"])
@role_required(*VERSION_ROLES)
def judge_version_new(request: HtmxHttpRequest) -> HttpResponse:
    """Create a judge version; ``?from=<uuid>`` starts from an existing one ("edit"), saved as
    a new version."""
    # ?from=zzz is a 400 and an unknown version a 404 naming ``from``, not a blank form.
    source = query_object(
        request, "from", JudgeVersion.objects.select_related("judge"), noun="judge version"
    )
    if request.method == "POST":
        form = JudgeVersionForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                version, created = versions.judge_version_create(
                    judge_name=data["name"],
                    kind=data["kind"],
                    model=data["model"],
                    base_url=data["base_url"],
                    prompt_template=data["prompt_template"],
                    params=data["params_json"],
                    output_schema=data["output_schema_json"],
                    threshold=data["threshold"],
                )
            except DomainError as exc:
                form_error(form, exc)  # on the prompt_template field when it names it
            else:
                if created:
                    messages.success(
                        request,
                        f"Created {version} (content hash "
                        f"{version.content_hash[:12]}). A new version starts "
                        "untrusted: its grades are provisional.",
                    )
                else:
                    messages.info(
                        request,
                        f"Nothing changed: {version} already has this "
                        "content; no new version was made.",
                    )
                return redirect("judges:version-detail", version_id=version.uuid)
    else:
        form = JudgeVersionForm(initial=JudgeVersionForm.initial_from(source) if source else None)
    return render(request, "judges/judge_version_new.html", {"form": form, "source": source})


@require_GET
@role_required(*VERSION_ROLES)
def judge_version_detail(request: HtmxHttpRequest, version_id) -> HttpResponse:
    """A judge version with its trust, cost, bias, probe report and judge runs. Over htmx with
    target ``probe-report`` or ``judge-runs`` only that part, polling every 2 s while in flight."""
    version = _version_or_404(version_id)
    judge_runs = list(
        JudgeRun.objects.filter(judge_version=version).select_related("run__suite", "base_run")
    )
    probe = ProbeRun.objects.filter(judge_version=version).first()
    context = {
        "version": version,
        "probe": probe,
        "probe_spend": selectors.probe_spend_get(probe_run=probe) if probe else None,
        "judge_runs": judge_runs,
        "judge_runs_active": any(jr.status not in JudgeRun.TERMINAL for jr in judge_runs),
    }
    if request.htmx and request.htmx.target in POLLED_PARTS:
        # The probe report and the judge-run table poll themselves while work is in flight.
        return render(request, f"judges/judge_version_detail.html#{request.htmx.target}", context)
    bias = selectors.position_bias_list(judge_version_ids=[version.id])
    return render(
        request,
        "judges/judge_version_detail.html",
        {
            **context,
            "cost": selectors.judge_cost_get(judge_version=version),
            "bias": bias[0] if bias else None,
            "probes_supported": probes.probes_supported(judge_version=version),
            "run_form": JudgeRunForm(),
            "other_versions": version.judge.versions.exclude(id=version.id),
        },
    )


@require_POST
@role_required(*VERSION_ROLES)
def judge_run_start(request: HtmxHttpRequest, version_id) -> HttpResponse:
    """Start grading a run with this version; on to the judge run's page."""
    version = _version_or_404(version_id)
    form = JudgeRunForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{field}: {' '.join(map(str, errors))}")
        return redirect("judges:version-detail", version_id=version.uuid)
    try:
        judge_run = runs.judge_run_start(
            run=form.cleaned_data["run"],
            judge_version=version,
            sample=form.cleaned_data["sample"],
            by=request.user,
        )
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"{version} is grading {judge_run.trials_total} trials of run {judge_run.run.name}.",
        )
        return redirect("judges:judge-run-detail", judge_run_id=judge_run.uuid)
    return redirect("judges:version-detail", version_id=version.uuid)


@require_POST
@role_required(*VERSION_ROLES)
def probe_run_start(request: HtmxHttpRequest, version_id) -> HttpResponse:
    """Queue the injection probes against this version; back to its page."""
    version = _version_or_404(version_id)
    try:
        probes.probe_run_start(judge_version=version, by=request.user)
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Injection probes queued against {version}.")
    return redirect("judges:version-detail", version_id=version.uuid)


@require_POST
@role_required(*VERSION_ROLES)
def pairwise_judge_run_start(request: HtmxHttpRequest) -> HttpResponse:
    """Compare a head run with a base run (the comparison page's form); on to the judge run's
    page, or back to the comparison with the error."""
    form = PairwiseJudgeRunForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{field}: {' '.join(map(str, errors))}")
        base, head = form.cleaned_data.get("base_run"), form.cleaned_data.get("head_run")
        if base is None or head is None:
            return redirect("evals:run-list")
        return redirect("evals:comparison", head_id=head.uuid, base_id=base.uuid)
    base, head = form.cleaned_data["base_run"], form.cleaned_data["head_run"]
    version = form.cleaned_data["judge_version"]
    try:
        judge_run = runs.pairwise_judge_run_start(
            base=base, head=head, judge_version=version, by=request.user
        )
    except DomainError as exc:
        messages.error(request, str(exc))
        return redirect("evals:comparison", head_id=head.uuid, base_id=base.uuid)
    messages.success(
        request,
        f"{version} is comparing {judge_run.trials_total} pairs of {head.name} against "
        f"{base.name}, in both presentation orders.",
    )
    return redirect("judges:judge-run-detail", judge_run_id=judge_run.uuid)


def _judge_run_or_404(judge_run_id) -> JudgeRun:
    return get_object_or_404(
        JudgeRun.objects.select_related(
            "judge_version__judge", "run__suite", "base_run", "started_by", "cancelled_by"
        ),
        uuid=judge_run_id,
    )


def _judge_run_context(judge_run: JudgeRun) -> dict:
    tally = selectors.pairwise_tally_get(judge_run=judge_run) if judge_run.is_pairwise else None
    return {"judge_run": judge_run, "tally": tally}


def _judge_run_progress_response(request: HtmxHttpRequest, judge_run: JudgeRun) -> HttpResponse:
    context = {**_judge_run_context(judge_run), "finished_now": judge_run.is_terminal}
    html = render_to_string("judges/fragments/judge_run_progress.html", context, request=request)
    return HttpResponseStopPolling(html) if judge_run.is_terminal else HttpResponse(html)


@require_GET
@role_required(*VERSION_ROLES)
def judge_run_detail(request: HtmxHttpRequest, judge_run_id) -> HttpResponse:
    """A judge run's progress bar (polled every 2 s), cancel button and report
    (``#judge-run-report``, swapped in when it ends)."""
    judge_run = _judge_run_or_404(judge_run_id)
    context = {
        **_judge_run_context(judge_run),
        "verdicts": selectors.judge_run_verdicts_get(judge_run=judge_run),
    }
    return render(request, "judges/judge_run_detail.html", context)


@require_GET
@role_required(*VERSION_ROLES)
def judge_run_progress(request: HtmxHttpRequest, judge_run_id) -> HttpResponse:
    """The progress fragment; 286 (stop polling) once ended, fetching the final report
    (``templates/fragments/swap_final.html``)."""
    return _judge_run_progress_response(request, _judge_run_or_404(judge_run_id))


@require_POST
@role_required(*VERSION_ROLES)
def judge_run_cancel(request: HtmxHttpRequest, judge_run_id) -> HttpResponse:
    """Cancel a judge run; htmx gets the progress fragment, a form post a redirect."""
    judge_run = _judge_run_or_404(judge_run_id)
    cancelled = runs.judge_run_cancel(judge_run=judge_run, by=request.user, via=Via.PAGE)
    if request.htmx:
        return _judge_run_progress_response(request, judge_run)
    if cancelled:
        messages.success(request, "Judge run cancelled: no further judge calls.")
    else:
        messages.info(request, f"Judge run is {judge_run.status}; nothing to cancel.")
    return redirect("judges:judge-run-detail", judge_run_id=judge_run.uuid)
