"""HTML views for comparing a head run with a base run of the same suite.

Thin: the comparison comes through ``evals.comparison.cache`` and the decision uses the gate
command's defaults, so this page and ``manage.py gate`` agree. The case table is filtered,
sorted and paged server-side; htmx swaps only the table. Viewer roles."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseStopPolling

from core.errors import DomainError
from core.http import (
    RUNNER_ROLES,
    VIEWER_ROLES,
    HtmxHttpRequest,
    query_choice,
    query_page,
    query_uuid,
    role_required,
)
from core.roles import ENGINEER, LEAD, user_has_role
from evals.blindness import BLIND_COMPARISON, comparison_is_blind
from evals.charts.forest import forest_chart
from evals.comparison.agents import agent_moves_get
from evals.comparison.baseline_verdicts import verdict_remember
from evals.comparison.cache import comparison_cached_get
from evals.comparison.case import case_uuids_by_hash, comparison_case_get
from evals.comparison.compute import CHANGE_CLASSES
from evals.comparison.decisions import decision_movement_get
from evals.comparison.gate import comparison_plan, gate_decide
from evals.comparison.table import DEFAULT_SORT, SORTS, TableQuery, case_rows_select
from evals.comparison.topup import top_up_result, top_up_settled_get, top_up_start
from evals.grading.rungs import judge_rung
from evals.models import Case, Run, TopUp
from evals.report.costs import comparison_cost_classes
from evals.suites import power_sentence
from evals.target_diff import target_diff

CASE_TABLE_PAGE_SIZE = 200
GATE_ALPHA = 0.05  # manage.py gate's default --alpha


def _runs(head_id, base_id) -> tuple[Run, Run]:
    head = get_object_or_404(Run.objects.select_related("suite"), uuid=head_id)
    base = get_object_or_404(Run.objects.select_related("suite"), uuid=base_id)
    if base.suite_id != head.suite_id:
        raise Http404("The two runs are not runs of the same suite.")
    return base, head


@require_GET
@role_required(*VIEWER_ROLES)
def comparison(request: HtmxHttpRequest, head_id, base_id) -> HttpResponse:
    """The comparison of head against base with the gate's decision; once a top-up of the pair at
    this alpha settled or hit its cost cap, its figures and decision (``top_up_result``)."""

    base, head = _runs(head_id, base_id)
    if comparison_is_blind(request.user, base, head):
        context = {"base": base, "head": head, "blind_note": BLIND_COMPARISON}
        return render(request, "evals/comparison_blind.html", context)
    # The gate command's defaults, so the page shows what CI would do on these two runs.
    plan, replay_refusal = comparison_plan(base=base, head=head, alpha=GATE_ALPHA)
    top_up = TopUp.objects.filter(base=base, head=head).first()
    settled = top_up_settled_get(base=base, head=head, alpha=GATE_ALPHA)
    if settled is not None:
        # Settled with more trials: the decision and every figure read those trials too,
        # as ``gate`` and the API report them (``comparison_decision``).
        comp, decision = top_up_result(top_up=settled)
    else:
        comp = comparison_cached_get(base=base, head=head, alpha=GATE_ALPHA)
        decision = gate_decide(comp, alpha=GATE_ALPHA, plan=plan)
    # The run list's regression flag reads this verdict (evals.comparison.baseline_verdicts).
    verdict_remember(base=base, head=head, verdict=decision.verdict)
    query = TableQuery(
        change=query_choice(request, "change", CHANGE_CLASSES),
        tag=request.GET.get("tag", "")[:200],
        sort=query_choice(request, "sort", SORTS, DEFAULT_SORT),
    )
    rows = case_rows_select(comp.cases, query=query)
    page = Paginator(rows, CASE_TABLE_PAGE_SIZE).get_page(query_page(request))
    context = {
        "base": base,
        "head": head,
        "comparison": comp,
        "decision": decision,
        "replay_refusal": replay_refusal,
        "top_up": top_up,
        "can_settle": user_has_role(request.user, ENGINEER, LEAD),
        "query": query,
        "rows_page": page,
        "change_classes": CHANGE_CLASSES,
        "sorts": SORTS,
        "tags": sorted({t for r in comp.cases for t in r.tags}),
        "case_ids": case_uuids_by_hash(
            suite_id=head.suite_id,
            rows=[*page.object_list, *comp.added, *comp.removed, *comp.changed],
        ),
        "power": power_sentence(comp.detectable) if comp.detectable else None,
        "movement": decision_movement_get(base=base, head=head),
        # What changed in the target and the graders (evals.target_diff).
        "target_change": target_diff(
            base.target, head.target, base_graders=base.graders, head_graders=head.graders
        ),
        # Agent runs (state and trajectory graders): outcome and trajectory rates per case.
        "agent_moves": agent_moves_get(base=base, head=head),
        # Which token classes each side's costs priced, and why the unknown ones are unknown.
        "cost_classes_sides": comparison_cost_classes(base=base, head=head),
        "class_links": [
            (name, query.url(change=name), name == query.change) for name in ("", *CHANGE_CLASSES)
        ],
        "sort_url": query.url(sort="-effect" if query.sort == "effect" else "effect"),
        "page_url": query.url() + ("&" if query.url() != "?" else "") + "page=",
    }
    rung = judge_rung()
    if context["can_settle"] and rung is not None:  # engineers and leads start pairwise runs
        context["pairwise"] = rung.pairwise_judging(base=base, head=head)
    if request.htmx and request.htmx.target == "case-table":
        return render(request, "evals/comparison_detail.html#case-table", context)
    context["forest"] = forest_chart(comp)
    return render(request, "evals/comparison_detail.html", context)


@require_GET
@role_required(*VIEWER_ROLES)
def comparison_pick(request: HtmxHttpRequest, run_id) -> HttpResponse:
    """Redirect ``?base=<uuid>`` to the comparison of this run (head) against that run."""
    base_id = query_uuid(request, "base")  # ?base=zzz is a 400
    if base_id is None:
        raise BadRequest("base: choose a run of the same suite")
    base, head = _runs(run_id, base_id)
    return redirect("evals:comparison", head_id=head.uuid, base_id=base.uuid)


@require_GET
@role_required(*VIEWER_ROLES)
def comparison_case(request: HtmxHttpRequest, head_id, base_id, case_id) -> HttpResponse:
    """One case: base and head trials side by side by attempt, a word-level diff (escaped spans),
    grades and reasons as the user may see them (``evals.blindness``)."""
    base, head = _runs(head_id, base_id)
    try:
        detail = comparison_case_get(base=base, head=head, case_uuid=case_id, viewer=request.user)
    except Case.DoesNotExist as exc:
        raise Http404("No such case in these runs.") from exc
    return render(
        request, "evals/comparison_case.html", {"base": base, "head": head, "detail": detail}
    )


@require_POST
@role_required(*RUNNER_ROLES)
def comparison_settle(request: HtmxHttpRequest, head_id, base_id) -> HttpResponse:
    """Start settling the comparison's suspects (``top_up_start``); back to the comparison."""
    base, head = _runs(head_id, base_id)
    try:
        top_up_start(base=base, head=head, alpha=GATE_ALPHA, by=request.user)
    except DomainError as exc:
        messages.error(request, f"Not started: {exc}")
    return redirect("evals:comparison", head_id=head.uuid, base_id=base.uuid)


@require_GET
@role_required(*VIEWER_ROLES)
def comparison_top_up(request: HtmxHttpRequest, head_id, base_id) -> HttpResponse:
    """The top-up's state (the page polls it every 2 s; stops once it has ended)."""
    base, head = _runs(head_id, base_id)
    top_up = TopUp.objects.filter(base=base, head=head).first()
    response = render(
        request,
        "evals/comparison_detail.html#top-up",
        {"base": base, "head": head, "top_up": top_up},
    )
    if top_up is None or top_up.is_terminal:
        response.status_code = HttpResponseStopPolling.status_code
    return response
