"""An experiment declared from outside: the API's body, a config file's ``[experiments.NAME]``
table, a JSON file given to ``manage.py run_experiment``. One shape for all three (docs/
experiments.md, "Starting and settling"): ``suite``, ``name``, ``variants`` (each ``{label,
target}`` or ``{label, preset}``: a target preset declared with ``apply_config``), ``graders``
or ``grader_set`` (a grader set preset), ``trials_per_case``, ``alpha``, ``metric``, ``k``,
``seed``, ``source_version``. Presets are resolved here into the targets and graders
``experiment_start`` takes; every other check is ``experiment_start``'s (and ``run_start``'s)."""

from __future__ import annotations

from typing import Any

from core.bounds import seed_problem
from core.errors import DomainError
from evals.experiments.start import _seeded, experiment_start
from evals.grading.grader_config import parse_grader_specs
from evals.models import Experiment, GraderSetPreset, Suite, TargetPreset
from evals.runner.start import DEFAULT_TRIALS_PER_CASE
from evals.runner.targets.base import target_validate

SPEC_FIELDS = (
    "suite",
    "name",
    "variants",
    "graders",
    "grader_set",
    "trials_per_case",
    "alpha",
    "metric",
    "k",
    "seed",
    "source_version",
)


def _where(prefix: str, field: str) -> str:
    return f"{prefix}.{field}" if prefix else field


def variants_resolved(variants: Any, *, prefix: str = "") -> Any:
    """``variants`` with each ``{label, preset}`` turned into ``{label, target}`` (the preset's
    config, copied). Anything not a list of objects is returned as given, for
    ``experiment_start`` to refuse. Raises ``DomainError`` on ``variants[i].preset``: both
    ``target`` and ``preset``, not a non-empty string, or no preset of that name."""
    if not isinstance(variants, list):
        return variants
    out: list = []
    for i, variant in enumerate(variants):
        if not isinstance(variant, dict) or "preset" not in variant:
            out.append(variant)
            continue
        field = _where(prefix, f"variants[{i}].preset")
        if "target" in variant:
            raise DomainError("give target or preset, not both", field=field)
        name = variant["preset"]
        if not isinstance(name, str) or not name:
            raise DomainError("expected the name of a target preset", field=field)
        preset = TargetPreset.objects.filter(name=name).first()
        if preset is None:
            raise DomainError(
                f"no target preset named {name[:100]!r} (declare it with apply_config)",
                field=field,
            )
        rest = {k: v for k, v in variant.items() if k != "preset"}
        out.append({**rest, "target": dict(preset.config)})
    return out


def graders_resolved(*, graders: Any, grader_set: Any, prefix: str = "") -> Any:
    """The grader list: ``graders`` as given, or grader set preset ``grader_set``'s. Raises
    ``DomainError``: neither or both given (on ``graders``), ``grader_set`` naming no preset."""
    if graders is not None and grader_set is not None:
        raise DomainError(
            "give graders or grader_set, not both", field=_where(prefix, "grader_set")
        )
    if grader_set is None:
        if graders is None:
            raise DomainError(
                "required: a list of graders, or grader_set (a grader set preset)",
                field=_where(prefix, "graders"),
            )
        return graders
    if not isinstance(grader_set, str) or not grader_set:
        raise DomainError(
            "expected the name of a grader set preset", field=_where(prefix, "grader_set")
        )
    preset = GraderSetPreset.objects.filter(name=grader_set).first()
    if preset is None:
        raise DomainError(
            f"no grader set preset named {grader_set[:100]!r} (declare it with apply_config)",
            field=_where(prefix, "grader_set"),
        )
    return list(preset.graders)


def _renamed(error: DomainError, prefix: str) -> DomainError:
    if not prefix:
        return error
    return DomainError(
        error.message,
        field=_where(prefix, error.field) if error.field else prefix,
        record=error.record,
        code=error.code,
        **error.extra,
    )


def experiment_spec_start(
    *, spec: dict, suite: Suite, started_by=None, prefix: str = ""
) -> Experiment:
    """Start the experiment ``spec`` declares (the module's shape; ``suite`` already found by
    the caller, who reads ``spec["suite"]`` its own way) through ``experiment_start``.

    ``prefix``: where the spec sits in its document (``experiments.prompts`` in a config
    file), put before every error's field. Raises ``DomainError``: an unknown field, a preset
    naming nothing, and everything ``experiment_start`` refuses (nothing written then)."""
    try:
        unknown = sorted(set(spec) - set(SPEC_FIELDS))
        if unknown:
            raise DomainError(f"unknown field ({', '.join(SPEC_FIELDS)})", field=unknown[0])
        graders = graders_resolved(graders=spec.get("graders"), grader_set=spec.get("grader_set"))
        return experiment_start(
            suite=suite,
            name=spec.get("name", ""),  # checked by experiment_start
            variants=variants_resolved(spec.get("variants")),
            graders=graders,  # checked by run_start
            trials_per_case=spec.get("trials_per_case", DEFAULT_TRIALS_PER_CASE),
            alpha=spec.get("alpha", 0.05),
            metric=spec.get("metric", Experiment.Metric.PASS_RATE),
            k=spec.get("k", 1),
            seed=spec.get("seed"),
            source_version=_source_version(spec.get("source_version", "")),
            started_by=started_by,
        )
    except DomainError as error:
        raise _renamed(error, prefix) from error


def _source_version(value: object) -> str:
    if not isinstance(value, str):
        raise DomainError("expected a string", field="source_version")
    return value


def experiment_spec_check(*, spec: object, prefix: str) -> None:
    """Check a declared experiment without starting it (``apply_config``): a table, known
    fields, presets that exist, every inline target (``target_validate``) and the grader list
    (``parse_grader_specs``). What only a start can know (the name free in its suite, the
    settings' ranges) is checked by the start. Raises ``DomainError`` under ``prefix``."""
    if not isinstance(spec, dict):
        raise DomainError("expected a table", field=prefix)
    try:
        unknown = sorted(set(spec) - set(SPEC_FIELDS) - {"name"})
        if unknown or "name" in spec:
            raise DomainError(
                "unknown field (the table's name is the experiment's name)",
                field=(unknown or ["name"])[0],
            )
        if not isinstance(spec.get("suite"), str) or not spec["suite"]:
            raise DomainError("required: the name of a suite", field="suite")
        graders = graders_resolved(graders=spec.get("graders"), grader_set=spec.get("grader_set"))
        try:
            parse_grader_specs(graders)
        except DomainError as error:
            raise DomainError(
                error.message,
                field=error.field if error.field.startswith("graders") else "graders",
                code=error.code,
            ) from error
        seed = spec.get("seed")
        if seed is not None and (problem := seed_problem(seed)):
            raise DomainError(problem, field="seed")
        variants = variants_resolved(spec.get("variants"))
        if not isinstance(variants, list):
            raise DomainError("expected an array of tables [[...variants]]", field="variants")
        for i, variant in enumerate(variants):
            if not isinstance(variant, dict) or not isinstance(variant.get("target"), dict):
                raise DomainError(
                    "expected {label, target} or {label, preset}", field=f"variants[{i}]"
                )
            try:
                target_validate(_seeded(variant["target"], seed))
            except DomainError as error:
                field = error.field or "target"
                if not field.startswith("target"):
                    field = f"target.{field}"
                raise DomainError(
                    error.message, field=f"variants[{i}].{field}", code=error.code
                ) from error
    except DomainError as error:
        raise _renamed(error, prefix) from error
