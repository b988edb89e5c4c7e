"""HTML views for suites: the suite page (viewers), setting a baseline and graduating a case
(engineers and leads, POST)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from core.errors import DomainError
from core.forms import unstorable_shown_on_form
from core.http import RUNNER_ROLES, VIEWER_ROLES, role_required
from core.ids import uuid_parse
from evals.baselines import baseline_set as baseline_set_service
from evals.blindness import blind_run_ids
from evals.case_changes import case_changes_attach, case_changes_list
from evals.cases import case_graduate as case_graduate_service
from evals.charts.trend import trend_chart
from evals.comparison.summary import detectable_drop_get
from evals.experiments.page import experiments_of_suite
from evals.forms import BaselineSetForm
from evals.models import Case, Run, Suite
from evals.suites import power_sentence, suite_page_get
from evals.views.runs import run_page


@require_GET
@role_required(*VIEWER_ROLES)
def suite_detail(request: HttpRequest, suite_id) -> HttpResponse:
    """The suite page: cases, changes, pass rate over time, baseline, power, graduation."""
    suite = get_object_or_404(Suite, uuid=suite_id)
    page = suite_page_get(suite=suite, cases_page=_page_number(request, "cases_page"))
    # A reviewer labeling items that share an input with a run's trials sees none of its pass
    # rate: not as a point of the trend, not in its table (evals.blindness, as the runs list).
    blind = blind_run_ids(request.user, run_ids=[p.run.id for p in page.runs])
    case_changes_attach(cases=page.active_cases)
    changes_page = _page_number(request, "changes_page")
    changes, older = case_changes_list(suite=suite, page=changes_page)
    return render(
        request,
        "evals/suite_detail.html",
        {
            "page": page,
            "suite": suite,
            "trend": trend_chart(
                [p for p in page.runs if p.run.id not in blind],
                baseline_run_id=page.baseline.run_id if page.baseline else None,
            ),
            "blind_run_ids": blind,
            "power": _suite_power(page),
            "changes": changes,
            "changes_page": changes_page,
            "changes_older": older,
            "experiments": experiments_of_suite(suite=suite),
        },
    )


def _page_number(request: HttpRequest, name: str) -> int:
    """The 1-based page number in query parameter ``name``; 1 when absent or not a positive
    integer of at most 6 digits (a link the page itself made is never refused)."""
    raw = request.GET.get(name, "")
    return int(raw) if raw.isascii() and raw.isdigit() and 0 < len(raw) <= 6 and int(raw) else 1


def _suite_power(page) -> str | None:
    """The minimum detectable drop in words, from the baseline; None without a graded baseline."""
    if page.baseline is None:
        return None

    power = detectable_drop_get(run=page.baseline.run)
    return power_sentence(power) if power is not None else None


@unstorable_shown_on_form
@require_POST
@role_required(*RUNNER_ROLES)
def baseline_set(request: HttpRequest, run_id) -> HttpResponse:
    """Make this run its suite's baseline; back to the run page (or ``next``). A refused note shows
    the run page again with the error and the typed text; nothing is saved."""

    run = get_object_or_404(Run.objects.select_related("suite", "cancelled_by"), uuid=run_id)
    form = BaselineSetForm(request.POST)
    if not form.is_valid():
        return run_page(request, run, baseline_form=form)
    try:
        baseline_set_service(
            suite=run.suite, run=run, by=request.user, note=form.cleaned_data["note"]
        )
    except DomainError as exc:
        messages.error(request, f"Baseline not set: {exc}")
    else:
        messages.success(request, f"{run.name} is now the baseline of {run.suite.name}.")
    if request.POST.get("next") == "suite":
        return redirect("evals:suite-detail", suite_id=run.suite.uuid)
    return redirect(run.get_absolute_url())


@require_POST
@role_required(*RUNNER_ROLES)
def case_graduate(request: HttpRequest, suite_id, case_id) -> HttpResponse:
    """Graduate a capability case into the regression suite chosen in ``into_suite`` (a
    suite UUID); refuses (message, no write) a case that is not a current candidate."""

    suite = get_object_or_404(Suite, uuid=suite_id)
    case = get_object_or_404(Case.objects.select_related("suite"), uuid=case_id, suite=suite)
    into_uuid = uuid_parse(request.POST.get("into_suite"))
    into = None if into_uuid is None else Suite.objects.filter(uuid=into_uuid).first()
    back = redirect("evals:suite-detail", suite_id=suite.uuid)
    if into is None:
        messages.error(request, "into_suite: choose a regression suite.")
        return back
    try:
        case_graduate_service(case=case, into_suite=into, by=request.user)
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{case.key} graduated into {into.name}.")
    return back
