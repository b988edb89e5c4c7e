"""Reading an experiment's decision: the set of variants that could be the best, the cheapest
within it, the quality–cost Pareto front, one sentence saying who is out and why.

The counts are the grid's (``evals.grid.cells.runs_case_counts``: the report's verdict per
trial, one query for every variant), the statistics ``stats.best_set`` and
``stats.cost_choice`` (docs/statistics.md, "Experiments"). Counting rules, said on the page
in ``notes``: a trial the pipeline errored on is a failure of its variant (it would fail a user
too) and stays in the denominator; a grade that errored is not judged and leaves both counts;
a case where some variant has no graded trial is left out for every variant (paired)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
from django.core.cache import caches
from django.db.models import Count, Max, Q, Sum

from evals.comparison.summary import run_summary_keys
from evals.experiments.racing import racing_best_set
from evals.grid.cells import runs_case_counts, runs_gating_keys
from evals.models import Experiment, ExperimentVariant, Run, RunReprice, Trial
from evals.run_status import run_status_shown, runs_unanswered
from stats.best_set import BestSet, best_set
from stats.cost_choice import CostChoice, cheapest, pareto_front

WAITING = "The best set is decided when every variant has finished."
KEY_VERSION = "v2"  # bump when ExperimentDecision's fields change
DECISION_CACHE_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True)
class VariantResult:
    """One variant as the decision reads it: its run and progress, ``passed``/``graded`` summed
    over the cases decided on (errored trials counted as graded failures), the metric's
    ``estimate`` with its 1 − alpha interval, whether it is ``in_set`` (else ``out_reason`` and
    ``beaten_by``), its costs in USD (None when unknown) and whether it is ``on_front`` (None
    when its cost is unknown: nothing can be said of where it stands)."""

    position: int
    label: str
    run: Run
    status: str
    trials_finished: int
    trials_total: int
    trials_errored: int
    passed: int
    graded: int
    estimate: float | None
    low: float | None
    high: float | None
    in_set: bool
    out_reason: str
    beaten_by: str | None
    cost_usd: Decimal | None
    cost_per_trial: float | None
    cost_per_pass: float | None
    cost_per_pass_low: float | None
    cost_per_pass_high: float | None
    on_front: bool | None
    cost_per_trial_low: float | None = None
    cost_per_trial_high: float | None = None


@dataclass(frozen=True)
class ExperimentDecision:
    """The experiment's answer. ``ready``: every variant's run has ended (else nothing is
    decided and ``sentence`` says so); ``decided``: one variant left in the set; ``best``: the
    labels in the set; ``sentence``: who is out and why, or what would settle it; ``cheapest``
    (a label or None, ``cheapest_reason``); ``pareto``: labels on the front; ``notes``; the
    statistics' ``method``, ``alpha`` and per-comparison ``level``; ``case_ids`` (C,) and the
    (V, C) int arrays ``passed`` and ``graded`` decided on."""

    experiment: Experiment
    variants: tuple[VariantResult, ...]
    ready: bool
    decided: bool
    best: tuple[str, ...]
    sentence: str
    cheapest: str | None
    cheapest_reason: str
    pareto: tuple[str, ...]
    notes: tuple[str, ...]
    method: str
    alpha: float
    level: float
    case_ids: np.ndarray
    passed: np.ndarray
    graded: np.ndarray


def experiment_variants(*, experiment: Experiment) -> list[ExperimentVariant]:
    """The variants of ``experiment`` by position, each with its run (and suite) read. One query."""
    return list(
        ExperimentVariant.objects.filter(experiment=experiment)
        .select_related("run", "run__suite")
        .order_by("position")
    )


def experiment_counts(
    *, variants: list[ExperimentVariant]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(case_ids, passed, graded, errored)``: the union of the variants' cases (C,), and (V, C)
    int arrays of passing trials, graded trials (pipeline errors included, as failures) and
    pipeline errors. Two queries at most, whatever V and C."""
    runs = [v.run for v in variants]
    graded_by = {r.id: frozenset(k for k, _ in r.grader_set.gating_pairs) for r in runs}
    gating = runs_gating_keys(runs=runs, graded=graded_by)
    counts = runs_case_counts(runs=runs, gating=gating)
    parts = [counts[r.id].case_ids for r in runs]
    case_ids = np.unique(np.concatenate(parts)) if parts else np.zeros(0)
    case_ids = case_ids.astype(np.int64)
    shape = (len(runs), case_ids.size)
    passed, graded, errored = (np.zeros(shape, dtype=np.int64) for _ in range(3))
    for v, run in enumerate(runs):
        c = counts[run.id]
        cols = np.searchsorted(case_ids, c.case_ids)
        passed[v, cols] = c.tally.passed
        errored[v, cols] = c.tally.pipeline_errors
        graded[v, cols] = c.tally.graded + c.tally.pipeline_errors
    return case_ids, passed, graded, errored


def experiment_costs(*, variants: list[ExperimentVariant], case_ids: np.ndarray) -> np.ndarray:
    """(V, C) float: the summed cost in USD of each variant's finished trials (errored ones
    included: they were paid for) on each case, NaN where any is unknown. One query."""
    index = {v.run_id: i for i, v in enumerate(variants)}
    costs = np.full((len(variants), case_ids.size), np.nan)
    rows = (
        Trial.objects.filter(
            run_id__in=list(index),
            replaced_by__isnull=True,
            status__in=[Trial.Status.OK, Trial.Status.ERROR],
        )
        .order_by()
        .values("run_id", "case_id")
        .annotate(cost=Sum("cost_usd"), unknown=Count("id", filter=Q(cost_usd__isnull=True)))
    )
    for row in rows:
        col = int(np.searchsorted(case_ids, row["case_id"]))
        if col < case_ids.size and case_ids[col] == row["case_id"] and not row["unknown"]:
            costs[index[row["run_id"]], col] = float(row["cost"] or 0)
    return costs


def experiment_decision(*, experiment: Experiment) -> ExperimentDecision:
    """``experiment``'s decision (module docstring: what is counted). Once every variant has
    finished, it is kept in the "shared" cache under the runs' summary keys, the experiment's
    settings, its racing looks and last re-pricing (``_decision_key``), so a new trial, grade,
    regrade, judge trust or case change decides again; a variant's close, in a worker, warms
    it for the web (``experiment_decision_warm``).
    Queries constant in the number of variants, cases and trials: five on a cache hit."""
    variants = experiment_variants(experiment=experiment)
    key = _decision_key(experiment, variants)
    if key is not None:
        cached = caches["shared"].get(key)
        if cached is not None:
            return dataclasses.replace(cached, experiment=experiment)
    decision = _decision_compute(experiment, variants)
    if key is not None:
        caches["shared"].set(key, decision, DECISION_CACHE_SECONDS)
    return decision


def experiment_decision_warm(*, run: Run) -> None:
    """As ``run`` closes: when it is a variant whose experiment has every variant finished,
    decide it now, so the experiment page's first view reads the cache. One query when
    ``run`` is no variant."""
    variant = ExperimentVariant.objects.filter(run_id=run.id).select_related("experiment").first()
    if variant is not None:
        experiment_decision(experiment=variant.experiment)


def _decision_key(experiment: Experiment, variants: list[ExperimentVariant]) -> str | None:
    """The cache key of a finished experiment's decision; None while a variant runs. Four
    queries (``run_summary_keys`` and the variants' last re-pricing)."""
    if not variants or not all(v.run.is_terminal for v in variants):
        return None
    keys = run_summary_keys(runs=[v.run for v in variants])
    if any(keys[v.run_id] is None for v in variants):
        return None
    # Costs are no part of a run's summary key; a re-pricing (evals.reprice) changes them.
    repriced = RunReprice.objects.filter(run_id__in=[v.run_id for v in variants]).aggregate(
        last=Max("id")
    )["last"]
    parts = [
        str(experiment.uuid),
        repr(float(experiment.alpha)),
        experiment.metric,
        str(experiment.k),
        str(experiment.racing_look),
        json.dumps(experiment.racing, sort_keys=True, default=str),
        f"repriced:{repriced}",
        *(f"{v.position}:{v.label}:{keys[v.run_id]}" for v in variants),
    ]
    digest = hashlib.sha256("|".join(parts).encode()).hexdigest()[:40]
    return f"assay:experiment-decision:{KEY_VERSION}:{experiment.uuid}:{digest}"


def _decision_compute(
    experiment: Experiment, variants: list[ExperimentVariant]
) -> ExperimentDecision:
    """The decision from the variants' trials (``experiment_decision`` without the cache)."""
    labels = [v.label for v in variants]
    case_ids, passed, graded, errored = experiment_counts(variants=variants)
    ready = all(v.run.is_terminal for v in variants)
    alpha = float(experiment.alpha)
    if not ready or case_ids.size == 0:
        waiting = [v.label for v in variants if not v.run.is_terminal]
        sentence = WAITING if waiting else "No variant has a graded trial: nothing to decide."
        return _undecided(experiment, variants, case_ids, passed, graded, errored, sentence)
    unanswered = {r.id for r in runs_unanswered([v.run for v in variants])}
    if unanswered:
        labels_out = ", ".join(v.label for v in variants if v.run_id in unanswered)
        sentence = (
            f"Cannot decide: {labels_out} has no answered trial (every trial errored), so "
            "nothing is known of its quality. Fix its endpoint or target and retry its "
            "errored trials (manage.py run_retry), then the set is decided."
        )
        return _undecided(experiment, variants, case_ids, passed, graded, errored, sentence)
    try:
        best = best_set(
            passed,
            graded,
            alpha=alpha,
            metric=experiment.metric,
            k=int(experiment.k),
            names=labels,
        )
    except ValueError as exc:
        return _undecided(
            experiment, variants, case_ids, passed, graded, errored, f"Cannot decide: {exc}."
        )
    # Raced: the set is the intersection of the looks' sets, never a fresh one at alpha.
    best = racing_best_set(experiment=experiment, best=best)
    costs = experiment_costs(variants=variants, case_ids=case_ids)
    choice = cheapest(best, costs, passed, graded, confidence=1 - alpha, names=labels)
    front = pareto_front(
        [f.estimate for f in best.variants], [f.cost_per_trial for f in choice.figures]
    )
    rows = tuple(
        _variant_result(v, i, best, choice, passed, graded, front, labels)
        for i, v in enumerate(variants)
    )
    return ExperimentDecision(
        experiment=experiment,
        variants=rows,
        ready=True,
        decided=best.decided,
        best=tuple(labels[i] for i in best.in_set_indices()),
        sentence=best.reason,
        cheapest=None if choice.index is None else labels[choice.index],
        cheapest_reason=choice.reason,
        # On the front by what is known: a variant of unknown cost is neither on it nor off it.
        pareto=tuple(labels[i] for i in front if choice.figures[i].cost_per_trial is not None),
        notes=_notes(variants, errored, best, case_ids.size),
        method=best.method,
        alpha=alpha,
        level=best.level,
        case_ids=case_ids,
        passed=passed,
        graded=graded,
    )


def _variant_result(
    variant: ExperimentVariant,
    i: int,
    best: BestSet,
    choice: CostChoice,
    passed: np.ndarray,
    graded: np.ndarray,
    front: tuple[int, ...],
    labels: list[str],
) -> VariantResult:
    figure, cost = best.variants[i], choice.figures[i]
    kept = np.ones(passed.shape[1], dtype=bool)
    kept[list(best.dropped_cases)] = False
    return VariantResult(
        **_progress(variant),
        passed=int(passed[i, kept].sum()),
        graded=int(graded[i, kept].sum()),
        estimate=figure.estimate,
        low=figure.low,
        high=figure.high,
        in_set=figure.in_set,
        out_reason="" if figure.in_set else figure.note,
        beaten_by=None if figure.beaten_by is None else labels[figure.beaten_by],
        cost_usd=None if cost.total_usd is None else Decimal(str(cost.total_usd)),
        cost_per_trial=cost.cost_per_trial,
        cost_per_pass=cost.cost_per_pass,
        cost_per_pass_low=cost.low,
        cost_per_pass_high=cost.high,
        on_front=None if cost.cost_per_trial is None else i in front,
        cost_per_trial_low=cost.trial_low,
        cost_per_trial_high=cost.trial_high,
    )


def _progress(variant: ExperimentVariant) -> dict:
    run = variant.run
    return {
        "position": variant.position,
        "label": variant.label,
        "run": run,
        "status": run_status_shown(run).label,
        "trials_finished": int(run.trials_finished or 0),
        "trials_total": int(run.trials_total or 0),
        "trials_errored": int(run.trials_errored or 0),
    }


def _undecided(experiment, variants, case_ids, passed, graded, errored, sentence):
    rows = tuple(
        VariantResult(
            **_progress(v),
            passed=int(passed[i].sum()) if passed.size else 0,
            graded=int(graded[i].sum()) if graded.size else 0,
            estimate=None,
            low=None,
            high=None,
            in_set=False,
            out_reason="",
            beaten_by=None,
            cost_usd=None,
            cost_per_trial=None,
            cost_per_pass=None,
            cost_per_pass_low=None,
            cost_per_pass_high=None,
            on_front=None,
        )
        for i, v in enumerate(variants)
    )
    return ExperimentDecision(
        experiment=experiment,
        variants=rows,
        ready=all(v.run.is_terminal for v in variants),
        decided=False,
        best=(),
        sentence=sentence,
        cheapest=None,
        cheapest_reason="",
        pareto=(),
        notes=_notes(variants, errored, None, case_ids.size),
        method="",
        alpha=float(experiment.alpha),
        level=float("nan"),
        case_ids=case_ids,
        passed=passed,
        graded=graded,
    )


def _notes(variants, errored: np.ndarray, best: BestSet | None, n_cases: int) -> tuple[str, ...]:
    notes = []
    for i, v in enumerate(variants):
        n = int(errored[i].sum()) if errored.size else 0
        if n:
            notes.append(
                f"{v.label}: {n} trial(s) the pipeline errored on are counted as failures "
                "(they would fail a user too); retry them to judge on answers alone."
            )
        if v.run.status == Run.Status.CANCELLED:
            notes.append(f"{v.label} was cancelled: only its finished trials count.")
    if best is not None and best.dropped_cases:
        notes.append(
            f"{len(best.dropped_cases)} of {n_cases} cases are left out: some variant has no "
            "graded trial there (every grade errored or none ran)."
        )
    return tuple(notes)
