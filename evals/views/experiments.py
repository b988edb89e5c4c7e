"""HTML views for experiments: the list, the experiment page (progress, decision, grid,
chart, config), one case across variants, and starting one from a page.

Viewers see the pages; a reviewer for whom a variant's run holds a trial they are labeling
blind (``evals.blindness.comparison_is_blind``) gets the variants' progress only, never the
decision, grid or counts (they would repeat verdicts), as the comparison page does. The case
view shows grades as the run's case view does. Only engineers and leads start experiments."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from core.errors import DomainError
from core.forms import unstorable_shown_on_form
from core.http import (
    RUNNER_ROLES,
    VIEWER_ROLES,
    HtmxHttpRequest,
    query_choice,
    query_object,
    query_page,
    role_required,
)
from core.roles import user_has_role
from evals.blindness import BLIND_COMPARISON, comparison_is_blind
from evals.experiments.decision import experiment_decision, experiment_variants
from evals.experiments.forms import (
    ExperimentStartForm,
    SettleForm,
    VariantFormSet,
    experiment_error_show,
    form_initial,
    variant_rows_initial,
    variants_posted,
)
from evals.experiments.page import (
    GRID_SORTS,
    attempt_rows,
    chart_drawn,
    chart_points,
    experiment_case_get,
    experiment_grid,
    variant_configs,
)
from evals.experiments.racing import experiment_settle_start
from evals.experiments.start import experiment_start
from evals.models import Case, Experiment, Run, Suite

LIST_PAGE_SIZE = 50


def _experiment(experiment_id) -> Experiment:
    return get_object_or_404(Experiment.objects.select_related("suite"), uuid=experiment_id)


@require_GET
@role_required(*VIEWER_ROLES)
def experiment_list(request: HtmxHttpRequest) -> HttpResponse:
    """Experiments, newest first, ``?suite=<uuid>`` to filter (malformed: 400; unknown: 404),
    ``LIST_PAGE_SIZE`` a page."""
    suite = query_object(request, "suite", Suite.objects.all())
    experiments = Experiment.objects.select_related("suite", "started_by").annotate(
        variant_count=Count("variants")
    )
    if suite is not None:
        experiments = experiments.filter(suite=suite)
    page = Paginator(experiments.order_by("-created_at", "-id"), LIST_PAGE_SIZE).get_page(
        query_page(request)
    )
    context = {"page": page, "suite": suite, "can_run": user_has_role(request.user, *RUNNER_ROLES)}
    return render(request, "evals/experiment_list.html", context)


@require_GET
@role_required(*VIEWER_ROLES)
def experiment_detail(request: HtmxHttpRequest, experiment_id) -> HttpResponse:
    """The experiment page: while running each variant's progress; once every variant has
    finished the decision (sentence, best set, cheapest, per-variant table, notes, method), the
    variant × case grid (``?sort=separates|case``, ``?page=``), the quality–cost points and the
    variants' targets. htmx on ``#experiment-grid`` gets the grid alone."""
    experiment = _experiment(experiment_id)
    variants = experiment_variants(experiment=experiment)
    runs = [v.run for v in variants]
    if comparison_is_blind(request.user, *runs):
        context = {"experiment": experiment, "variants": variants, "blind_note": BLIND_COMPARISON}
        return render(request, "evals/experiment_blind.html", context)
    decision = experiment_decision(experiment=experiment)
    sort = query_choice(request, "sort", GRID_SORTS, GRID_SORTS[0])
    grid = experiment_grid(decision=decision, page=query_page(request), sort=sort)
    points = chart_points(decision)
    context = {
        "experiment": experiment,
        "decision": decision,
        "confidence": 1 - decision.alpha,  # the set's; ``decision.level`` is per comparison
        "grid": grid,
        "points": points,
        "chart": chart_drawn(points),
        "configs": variant_configs(variants),
        "can_run": user_has_role(request.user, *RUNNER_ROLES),
        "settle_form": SettleForm(),
    }
    if request.htmx and request.htmx.target == "experiment-grid":
        return render(request, "evals/experiment_detail.html#experiment-grid", context)
    return render(request, "evals/experiment_detail.html", context)


@require_GET
@role_required(*VIEWER_ROLES)
def experiment_progress(request: HtmxHttpRequest, experiment_id) -> HttpResponse:
    """The variants' progress fragment, polled every 2 s; 286 (stop polling) once every variant's
    run has ended, with a one-shot fetch that swaps the page's decision in."""
    experiment = _experiment(experiment_id)
    variants = experiment_variants(experiment=experiment)
    done = all(v.run.is_terminal for v in variants)
    context = {"experiment": experiment, "variants": variants, "finished_now": done, "poll": True}
    html = render_to_string("evals/fragments/experiment_progress.html", context, request=request)
    return HttpResponseStopPolling(html) if done else HttpResponse(html)


@require_GET
@role_required(*VIEWER_ROLES)
def experiment_case(request: HtmxHttpRequest, experiment_id, case_key: str) -> HttpResponse:
    """One case (UUID or key) across the variants: each variant's trials side by side, outputs
    cut to a preview with a link to the whole, grades as the user may see them."""
    experiment = _experiment(experiment_id)
    try:
        case, columns = experiment_case_get(
            experiment=experiment, case_key=case_key, viewer=request.user
        )
    except Case.DoesNotExist as exc:
        raise Http404("No such case in this experiment's suite.") from exc
    context = {
        "experiment": experiment,
        "case": case,
        "columns": columns,
        "attempts": attempt_rows(columns),
    }
    return render(request, "evals/experiment_case.html", context)


@unstorable_shown_on_form
@require_http_methods(["GET", "POST"])
@role_required(*RUNNER_ROLES)
def experiment_new(request: HtmxHttpRequest) -> HttpResponse:
    """Start an experiment. GET: the form, ``?like=<run uuid>`` prefilled from that run (suite,
    graders, trials per case, its target as the base and as variant 1), else ``?suite=<uuid>``
    (malformed: 400, unknown: 404); rows are added in the page (``static/js/experiment_form.js``)
    and removed by their "remove" box. POST: ``experiment_start`` and a redirect to the
    experiment, or the form with each error on the field it names
    (``variants[i].target.prompt_template`` on row i's prompt template)."""
    if request.method == "POST":
        form = ExperimentStartForm(request.POST)
        rows = VariantFormSet(request.POST, prefix="variants")
        if form.is_valid() and rows.is_valid():
            variants, kept = variants_posted(form, rows)
            data = form.cleaned_data
            try:
                experiment = experiment_start(
                    suite=data["suite"],
                    name=data["name"],
                    variants=variants,
                    graders=data["graders"],
                    trials_per_case=data["trials_per_case"],
                    alpha=data["alpha"],
                    metric=data["metric"],
                    k=data["k"],
                    seed=data["seed"],
                    started_by=request.user,
                )
            except DomainError as exc:
                experiment_error_show(exc, form=form, rows=kept)
            else:
                return redirect(experiment.get_absolute_url())
        return render(request, "evals/experiment_new.html", {"form": form, "rows": rows})
    like = query_object(request, "like", Run.objects.select_related("suite"), noun="run")
    suite = like.suite if like else query_object(request, "suite", Suite.objects.all())
    form = ExperimentStartForm(initial=form_initial(like, suite))
    rows = VariantFormSet(initial=variant_rows_initial(like), prefix="variants")
    return render(request, "evals/experiment_new.html", {"form": form, "rows": rows, "like": like})


@require_POST
@role_required(*RUNNER_ROLES)
def experiment_settle(request: HtmxHttpRequest, experiment_id) -> HttpResponse:
    """Settle with more trials (``experiment_settle_start``: ``rounds``, ``trials_per_round``);
    back to the experiment with what happened, or why nothing did, as a message."""
    experiment = _experiment(experiment_id)
    form = SettleForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{name}: {' '.join(map(str, e))}" for name, e in form.errors.items())
        messages.error(request, f"Not started: {problems}")
        return redirect(experiment.get_absolute_url())
    try:
        experiment_settle_start(
            experiment=experiment,
            rounds=form.cleaned_data["rounds"],
            trials_per_round=form.cleaned_data["trials_per_round"],
            by=request.user,
        )
    except DomainError as exc:
        messages.error(request, f"Not started: {exc.message}")
    else:
        messages.success(
            request, "Settling with more trials: the variants still in the set run on."
        )
    return redirect(experiment.get_absolute_url())
