"""Builders for experiment page tests: an experiment of finished variant runs written directly
(bulk rows, no runner), each trial graded by one gating grader ``ok``."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from evals.models import Case, Experiment, ExperimentVariant, Grade, Run, Suite, Trial

GRADERS = [{"key": "ok", "kind": "contains", "config": {"value": "yes"}}]


def experiment_built(
    *,
    labels: list[str],
    n_cases: int,
    trials: int = 1,
    passes: Callable[[int, int, int], bool],
    name: str = "exp",
    suite: Suite | None = None,
    cost: str | None = "0.001",
    output: Callable[[int, int, int], str] | None = None,
    status: str = Run.Status.SUCCEEDED,
) -> Experiment:
    """An experiment of ``labels`` variants over ``n_cases`` cases (keys ``c0000``..) with
    ``trials`` per case; ``passes(variant, case, attempt)`` decides each verdict; every trial
    costs ``cost`` USD (None: unknown) and answers ``output(v, i, a)`` (default "yes"/"no")."""
    suite = suite or Suite.objects.create(name=f"suite-{name}")
    cases = list(Case.objects.filter(suite=suite).order_by("key"))
    if not cases:
        cases = Case.objects.bulk_create(
            Case(suite=suite, key=f"c{i:04d}", input=f"question {i}", content_hash=f"{i:064d}")
            for i in range(n_cases)
        )
    experiment = Experiment.objects.create(suite=suite, name=name, trials_per_case=trials)
    for v, label in enumerate(labels):
        run = Run.objects.create(
            suite=suite,
            name=f"{name} · {label}",
            target_kind="simulated",
            target={"kind": "simulated", "seed": v, "default_pass_probability": 0.5},
            graders=GRADERS,
            trials_per_case=trials,
            status=status,
            trials_total=n_cases * trials,
            trials_finished=n_cases * trials if status == Run.Status.SUCCEEDED else 0,
        )
        ExperimentVariant.objects.create(experiment=experiment, run=run, label=label, position=v)
        if status != Run.Status.SUCCEEDED:
            continue
        rows = Trial.objects.bulk_create(
            Trial(
                run=run,
                case=case,
                attempt=a,
                status=Trial.Status.OK,
                output=(output or _yes_no(passes))(v, i, a),
                cost_usd=Decimal(cost) if cost is not None else None,
            )
            for i, case in enumerate(cases)
            for a in range(1, trials + 1)
        )
        Grade.objects.bulk_create(
            Grade(
                trial=t,
                grader="ok",
                gating=True,
                status="ok",
                passed=passes(v, i // trials, i % trials + 1),
                score=1.0 if passes(v, i // trials, i % trials + 1) else 0.0,
            )
            for i, t in enumerate(rows)
        )
    return experiment


def _yes_no(passes):
    return lambda v, i, a: "yes" if passes(v, i, a) else "no"
