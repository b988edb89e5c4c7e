"""Writes of config-as-code presets: named targets and grader sets (``apply_config``'s
``[targets.NAME]`` and ``[grader_sets.NAME]``), validated with the code a run uses; errors
name the TOML table and field. Runs copy a preset into their snapshot, so a changed preset
never rewrites history."""

from __future__ import annotations

from typing import Literal

from core.errors import DomainError
from evals.grading.grader_config import grader_set_resolved, parse_grader_specs
from evals.models import GraderSetPreset, TargetPreset, preset_hash
from evals.runner.targets.base import target_validate

Action = Literal["created", "updated", "unchanged"]


def _renamed_error(exc: DomainError, *, old: str, new: str) -> DomainError:
    """``target.model: ...`` -> ``targets.prod.model: ...``: the error's field moved under the
    preset's table (``new`` itself when the error named no field under ``old``)."""
    field = exc.field or ""
    if field.startswith(old):
        field = new + field[len(old) :]
    elif field:
        field = f"{new}.{field}"
    else:
        field = new
    return DomainError(exc.message, field=field, code=exc.code)


def target_preset_apply(*, name: str, config: dict) -> tuple[TargetPreset, Action]:
    """Create or update target preset ``name``; ``DomainError`` on ``targets.<name>.<field>``."""
    where = f"targets.{name}"
    try:
        target_validate(config)
    except DomainError as exc:
        raise _renamed_error(exc, old="target", new=where) from exc
    return _apply(TargetPreset, name=name, field="config", value=config)


def grader_set_preset_apply(*, name: str, graders: list) -> tuple[GraderSetPreset, Action]:
    """Create or update grader set preset ``name``; ``DomainError`` under ``grader_sets.<name>``."""
    where = f"grader_sets.{name}.graders"
    try:
        specs = parse_grader_specs(graders)
    except DomainError as exc:
        raise _renamed_error(exc, old="graders", new=where) from exc
    stored = grader_set_resolved(graders, specs)  # a judge named by name: stored by UUID
    return _apply(GraderSetPreset, name=name, field="graders", value=stored)


def _apply(model, *, name: str, field: str, value) -> tuple:
    preset = model.objects.select_for_update().filter(name=name).first()
    if preset is None:
        return model.objects.create(name=name, **{field: value}), "created"
    if preset.content_hash == preset_hash(value):
        return preset, "unchanged"
    setattr(preset, field, value)
    preset.save()
    return preset, "updated"
