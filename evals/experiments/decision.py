"""PROVISIONAL stand-in for the coordinator's ``evals.experiments.decision`` (same signature),
so the experiment page can be built and tested before it lands; replaced by main's at merge.
Wilson intervals per variant, a variant in the set when its high bound reaches the best low."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
from django.db.models import Count, Q, Sum

from evals.grid.cells import runs_case_counts, runs_gating_keys
from evals.models import Experiment, ExperimentVariant, Run, Trial


@dataclass(frozen=True)
class VariantResult:
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
    on_front: bool


@dataclass(frozen=True)
class ExperimentDecision:
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
    """The variants by position, their runs selected."""
    return list(experiment.variants.select_related("run__suite").order_by("position"))


def _wilson(passed: int, n: int, z: float) -> tuple[float | None, float | None, float | None]:
    if n == 0:
        return None, None, None
    p = passed / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return p, max(0.0, c - h), min(1.0, c + h)


def experiment_decision(*, experiment: Experiment) -> ExperimentDecision:
    """The stand-in decision (see the module docstring)."""
    variants = experiment_variants(experiment=experiment)
    runs = [v.run for v in variants]
    gating = runs_gating_keys(runs=runs, graded={})
    counts = runs_case_counts(runs=runs, gating=gating)
    case_ids = np.unique(np.concatenate([counts[r.id].case_ids for r in runs] or [[]])).astype(
        np.int64
    )
    passed = np.zeros((len(runs), len(case_ids)), dtype=np.int64)
    graded = np.zeros_like(passed)
    for i, run in enumerate(runs):
        c = counts[run.id]
        idx = np.searchsorted(case_ids, c.case_ids)
        passed[i, idx] = c.tally.passed
        graded[i, idx] = c.tally.graded
    costs = {
        row["run_id"]: row
        for row in Trial.objects.filter(run__in=runs)
        .values("run_id")
        .annotate(
            cost=Sum("cost_usd"),
            unknown=Count("id", filter=Q(cost_usd__isnull=True, status=Trial.Status.OK)),
            done=Count("id", filter=Q(status=Trial.Status.OK)),
        )
    }
    ready = all(r.is_terminal for r in runs)
    z = 1.959963984540054
    bounds = [_wilson(int(passed[i].sum()), int(graded[i].sum()), z) for i in range(len(runs))]
    best_low = max((b[1] for b in bounds if b[1] is not None), default=0.0)
    leader = max(range(len(runs)), key=lambda i: bounds[i][0] or -1) if runs else 0
    results = []
    for i, (variant, run) in enumerate(zip(variants, runs, strict=True)):
        est, low, high = bounds[i]
        in_set = ready and high is not None and high >= best_low
        row = costs.get(run.id, {})
        cost = None if row.get("unknown") or row.get("cost") is None else row["cost"]
        n_pass = int(passed[i].sum())
        per_trial = float(cost) / row["done"] if cost is not None and row.get("done") else None
        per_pass = float(cost) / n_pass if cost is not None and n_pass else None
        reason = ""
        if ready and not in_set and est is not None and bounds[leader][0] is not None:
            gap = 100 * (bounds[leader][0] - est)
            reason = f"{gap:.1f} points below {variants[leader].label}"
        results.append(
            VariantResult(
                position=variant.position,
                label=variant.label,
                run=run,
                status=run.status,
                trials_finished=run.trials_finished,
                trials_total=run.trials_total,
                trials_errored=run.trials_errored,
                passed=n_pass,
                graded=int(graded[i].sum()),
                estimate=est,
                low=low,
                high=high,
                in_set=in_set,
                out_reason=reason,
                beaten_by=variants[leader].label if reason else None,
                cost_usd=cost,
                cost_per_trial=per_trial,
                cost_per_pass=per_pass,
                cost_per_pass_low=per_pass,
                cost_per_pass_high=per_pass,
                on_front=in_set,
            )
        )
    best = tuple(r.label for r in results if r.in_set)
    priced = [r for r in results if r.in_set and r.cost_per_pass is not None]
    cheapest = min(priced, key=lambda r: r.cost_per_pass or 0).label if priced else None
    out = [r for r in results if ready and not r.in_set]
    if not ready:
        sentence = "The best set is decided when every variant has finished."
    elif len(best) == 1:
        sentence = (
            f"{best[0]} is the best; "
            + "; ".join(f"{r.label} is out, {r.out_reason}" for r in out)
            + "."
        )
    else:
        sentence = f"{', '.join(best)} could each be the best; more trials would settle it."
    return ExperimentDecision(
        experiment=experiment,
        variants=tuple(results),
        ready=ready,
        decided=len(best) == 1,
        best=best,
        sentence=sentence,
        cheapest=cheapest,
        cheapest_reason="the lowest cost per passing trial in the set" if cheapest else "",
        pareto=best,
        notes=(),
        method="Wilson intervals (provisional)",
        alpha=experiment.alpha,
        level=1 - experiment.alpha,
        case_ids=case_ids,
        passed=passed,
        graded=graded,
    )
