"""An experiment as JSON: what the API answers (``GET /api/experiments/<uuid>``) and what
``manage.py run_experiment --json`` prints, one shape for both (docs/api.md, docs/
experiments.md). Variants with their run's status and progress; once every variant run has
finished, the decision (``evals.experiments.decision.experiment_decision``); the racing's
looks when settling was asked."""

from __future__ import annotations

import math
from decimal import Decimal

from core.decimals import decimal_plain
from evals.models import Experiment, ExperimentVariant
from evals.run_status import run_status_shown, run_trial_count


def experiment_ready(variants: list[ExperimentVariant]) -> bool:
    """Every variant run has finished (succeeded, failed or cancelled). No query."""
    return all(v.run.is_terminal for v in variants)


def _variant_json(variant: ExperimentVariant) -> dict:
    run = variant.run
    count = run_trial_count(run)
    return {
        "label": variant.label,
        "position": variant.position,
        "run": str(run.uuid),
        "status": run.status,
        "status_shown": run_status_shown(run).as_json(),
        "progress": {
            "finished": count.finished,
            "planned": count.planned,
            "errored": count.errored,
            "cancelled": count.cancelled,
        },
    }


def _money(value: Decimal | None) -> str | None:
    return None if value is None else decimal_plain(value)


def _finite(value: float | None) -> float | None:
    """``value``, None when unknown or not finite (a level never computed is NaN)."""
    return None if value is None or not math.isfinite(value) else float(value)


def decision_json(decision) -> dict:
    """An ``ExperimentDecision`` as JSON: labels, figures in [0, 1] (``estimate``, ``low``,
    ``high``: the metric and its 1 − alpha interval), costs in USD (``cost_usd`` a decimal
    string; the rest floats), null where unknown."""
    return {
        "decided": bool(decision.decided),
        "best": list(decision.best),
        "sentence": decision.sentence,
        "cheapest": decision.cheapest,
        "cheapest_reason": decision.cheapest_reason,
        "pareto": list(decision.pareto),
        "notes": list(decision.notes),
        "method": decision.method,
        "alpha": decision.alpha,
        "level": _finite(decision.level),
        "cases": len(decision.case_ids),
        "variants": [
            {
                "label": v.label,
                "position": v.position,
                "passed": v.passed,
                "graded": v.graded,
                "estimate": _finite(v.estimate),
                "low": _finite(v.low),
                "high": _finite(v.high),
                "in_set": v.in_set,
                "out_reason": v.out_reason,
                "beaten_by": v.beaten_by,
                "cost_usd": _money(v.cost_usd),
                "cost_per_trial": _finite(v.cost_per_trial),
                "cost_per_pass": _finite(v.cost_per_pass),
                "cost_per_pass_low": _finite(v.cost_per_pass_low),
                "cost_per_pass_high": _finite(v.cost_per_pass_high),
                "on_front": v.on_front,
            }
            for v in decision.variants
        ],
    }


def racing_json(experiment: Experiment) -> dict | None:
    """The racing as stored (``evals.experiments.racing``), positions shown as labels too;
    None when settling was never asked."""
    if not experiment.racing:
        return None
    racing = experiment.racing
    return {
        "status": racing.get("status"),
        "error": racing.get("error", ""),
        "rounds": racing.get("rounds"),
        "trials_per_round": racing.get("trials_per_round"),
        "looks": [
            {
                "look": look["look"],
                "in_set": look["in_set"],
                "active": look["active"],
                "cases": len(look["cases"]),
                "trials_added": look["trials_added"],
                "done": look["done"],
                "reason": look["reason"],
            }
            for look in racing.get("looks", [])
        ],
    }


def experiment_json(
    experiment: Experiment, variants: list[ExperimentVariant], *, decision=None
) -> dict:
    """The experiment (``variants`` from ``evals.experiments.decision.experiment_variants``) with
    ``decision``
    (an ``ExperimentDecision``, or None while waiting: ``"decision": null``). No query beyond
    the suite's (select it)."""
    return {
        "uuid": str(experiment.uuid),
        "suite": str(experiment.suite.uuid),
        "name": experiment.name,
        "alpha": experiment.alpha,
        "metric": experiment.metric,
        "k": experiment.k,
        "trials_per_case": experiment.trials_per_case,
        "seed": experiment.seed,
        "created_at": experiment.created_at.isoformat().replace("+00:00", "Z"),
        "ready": experiment_ready(variants),
        "variants": [_variant_json(v) for v in variants],
        "racing": racing_json(experiment),
        "decision": None if decision is None else decision_json(decision),
    }
