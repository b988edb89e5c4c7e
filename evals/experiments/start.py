"""Starting an experiment: one run per variant, all or nothing."""

from __future__ import annotations

import math
from copy import deepcopy

from django.db import IntegrityError, transaction

from core.bounds import seed_problem
from core.errors import DomainError
from core.text import unstorable_refuse
from evals.models import Experiment, ExperimentVariant, Run, Suite
from evals.runner.start import MAX_TRIALS_PER_CASE, run_start

MIN_VARIANTS = 2
MAX_VARIANTS = 20
LABEL_MAX = 100
NAME_MAX = 120  # leaves room for " · <label>" in each run's name (200)
ALPHA_RANGE = (0.001, 0.5)


def experiment_start(
    *,
    suite: Suite,
    name: str,
    variants: list[dict],
    graders: list[dict],
    trials_per_case: int,
    alpha: float = 0.05,
    metric: str = Experiment.Metric.PASS_RATE,
    k: int = 1,
    seed: int | None = None,
    source_version: str = "",
    started_by=None,
) -> Experiment:
    """Start ``variants`` (2 to 20 of ``{"label": str, "target": dict}``) on ``suite``: one run
    each, named ``"<name> · <label>"``, all with ``graders`` and ``trials_per_case``, in one
    transaction (a refused variant starts nothing).

    ``seed``: written into every variant target that takes a seed and names none (the
    simulated target's ``seed``; an OpenAI or Azure model target's ``seed_per_trial``, unless
    it sets ``settings.seed``), so a case and attempt share their seed across variants.
    ``alpha`` (0.001 to 0.5): 1 − the best set's confidence; ``metric``: ``pass_rate`` or
    ``pass_hat_k`` with ``k`` (1 to ``trials_per_case``).

    Raises ``DomainError`` before anything is written: a field of a variant is named
    ``variants[i].target.<field>`` / ``variants[i].label``; a shared field by its own name."""
    if not isinstance(name, str) or not name.strip():
        raise DomainError("must be a non-empty string", field="name")
    if len(name) > NAME_MAX:
        raise DomainError(f"must be at most {NAME_MAX} characters", field="name")
    unstorable_refuse(name, field="name")
    if isinstance(trials_per_case, bool) or not isinstance(trials_per_case, int):
        raise DomainError("must be an integer", field="trials_per_case")
    if not 1 <= trials_per_case <= MAX_TRIALS_PER_CASE:
        raise DomainError(
            f"must be from 1 to {MAX_TRIALS_PER_CASE} (got {trials_per_case})",
            field="trials_per_case",
        )
    _settings_check(alpha=alpha, metric=metric, k=k, trials_per_case=trials_per_case, seed=seed)
    labels = _variants_check(variants)
    if Experiment.objects.filter(suite=suite, name=name).exists():
        raise DomainError(
            f"an experiment named {name!r} already exists in suite {suite.name!r}",
            field="name",
            code="conflict",
        )
    targets = [_seeded(variant["target"], seed) for variant in variants]
    try:
        with transaction.atomic():
            experiment = Experiment.objects.create(
                suite=suite,
                name=name,
                alpha=float(alpha),
                metric=metric,
                k=k,
                trials_per_case=trials_per_case,
                seed=seed,
                started_by=started_by,
            )
            for position, (label, target) in enumerate(zip(labels, targets, strict=True)):
                run = _variant_run_start(
                    index=position,
                    suite=suite,
                    name=f"{name} · {label}",
                    target=target,
                    graders=graders,
                    trials_per_case=trials_per_case,
                    source_version=source_version,
                    started_by=started_by,
                )
                ExperimentVariant.objects.create(
                    experiment=experiment, run=run, label=label, position=position
                )
    except IntegrityError as exc:
        # Two requests with one name: the unique (suite, name) lets one in.
        raise DomainError(
            f"an experiment named {name!r} already exists in suite {suite.name!r}",
            field="name",
            code="conflict",
        ) from exc
    return experiment


def _settings_check(*, alpha, metric, k, trials_per_case: int, seed) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise DomainError("must be a number", field="alpha")
    low, high = ALPHA_RANGE
    if not low <= alpha <= high:
        raise DomainError(f"must be from {low} to {high} (got {alpha})", field="alpha")
    if metric not in Experiment.Metric.values:
        raise DomainError(f"must be one of {', '.join(Experiment.Metric.values)}", field="metric")
    if isinstance(k, bool) or not isinstance(k, int):
        raise DomainError("must be an integer", field="k")
    if not 1 <= k <= trials_per_case:
        raise DomainError(
            f"must be from 1 to trials_per_case ({trials_per_case}); got {k}", field="k"
        )
    if metric == Experiment.Metric.PASS_RATE and k != 1:
        raise DomainError("k is for metric pass_hat_k only", field="k")
    if seed is not None and (problem := seed_problem(seed)):
        raise DomainError(problem, field="seed")


def _variants_check(variants) -> list[str]:
    """The variants' labels, stripped; raises ``DomainError`` naming ``variants[i].<field>``."""
    if not isinstance(variants, list):
        raise DomainError("expected a list of {label, target}", field="variants")
    if not MIN_VARIANTS <= len(variants) <= MAX_VARIANTS:
        raise DomainError(
            f"an experiment has {MIN_VARIANTS} to {MAX_VARIANTS} variants (got {len(variants)})",
            field="variants",
        )
    labels: list[str] = []
    seen: dict[str, int] = {}
    for i, variant in enumerate(variants):
        if not isinstance(variant, dict):
            raise DomainError("expected an object {label, target}", field=f"variants[{i}]")
        unknown = sorted(set(variant) - {"label", "target"})
        if unknown:
            raise DomainError("unknown field", field=f"variants[{i}].{unknown[0]}")
        label = variant.get("label")
        if not isinstance(label, str) or not label.strip():
            raise DomainError("must be a non-empty string", field=f"variants[{i}].label")
        label = label.strip()
        if len(label) > LABEL_MAX:
            raise DomainError(
                f"must be at most {LABEL_MAX} characters", field=f"variants[{i}].label"
            )
        unstorable_refuse(label, field=f"variants[{i}].label")
        folded = label.casefold()
        if folded in seen:
            raise DomainError(
                f"the same label as variants[{seen[folded]}]", field=f"variants[{i}].label"
            )
        seen[folded] = i
        if not isinstance(variant.get("target"), dict):
            raise DomainError("expected an object", field=f"variants[{i}].target")
        labels.append(label)
    return labels


def _seeded(target: dict, seed: int | None) -> dict:
    """``target`` with the experiment's ``seed`` where it takes one and names none."""
    if seed is None:
        return target
    target = deepcopy(target)
    kind = target.get("kind")
    if kind == "simulated" and target.get("seed") is None:
        target["seed"] = seed
    elif kind == "openai" and target.get("provider", "openai") != "anthropic":
        settings = target.get("settings")
        has_seed = isinstance(settings, dict) and "seed" in settings
        if not has_seed and target.get("seed_per_trial") is None:
            target["seed_per_trial"] = seed
    return target


def _variant_run_start(*, index: int, **kwargs) -> Run:
    """``run_start`` for variant ``index``, its target's errors named ``variants[i].target...``."""
    try:
        return run_start(**kwargs)
    except DomainError as error:
        if error.field == "target" or error.field.startswith("target."):
            field = f"variants[{index}].{error.field}"
        elif error.field == "name":
            field = f"variants[{index}].label"
        else:
            raise
        raise DomainError(
            error.message,
            field=field,
            record=error.record,
            code=error.code,
            detail=error.detail,
            **error.extra,
        ) from error
