"""Grading recorded outputs: a finished run's ok trials graded after the fact by new
deterministic graders, added to its grader set under new keys so every reader sees them."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from core.chunks import chunked
from core.errors import DomainError
from core.roles import ENGINEER, LEAD, role_require
from evals.grading.grader_config import parse_grader_specs
from evals.grading.ladder import grades_record
from evals.models import Run, Trial

GRADE_CHUNK = 200


@dataclass(frozen=True)
class RunGradeSummary:
    """What ``run_grade`` did: new grader ``keys``, ok ``trials`` graded, ``grades`` written."""

    keys: tuple[str, ...]
    trials: int
    grades: int


def run_grade(*, run: Run, graders: list[dict], by=None) -> RunGradeSummary:
    """Grade ``run``'s current ok trials with ``graders`` (JSON, parsed strictly) under new keys;
    engineers and leads (``by`` None: a command). Idempotent per (trial, grader). Raises
    PermissionDenied or ``DomainError``: ``run`` not finished, a judge ``kind`` (judges grade
    through a judge run), a ``key`` already in the set (``conflict``), a config error."""
    if by is not None:
        role_require(by, ENGINEER, LEAD, action="grading a run's recorded outputs")
    specs = parse_grader_specs(graders)
    for index, spec in enumerate(specs):
        if spec.is_judge:
            raise DomainError(
                "grade_run grades with deterministic graders only; a judge grades through "
                "a judge run",
                field=f"graders[{index}].kind",
            )
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status not in (Run.Status.SUCCEEDED, Run.Status.FAILED):
            raise DomainError(
                f"run {locked.name!r} is {locked.status}; only a finished run is graded",
                field="run",
                code="conflict",
            )
        taken = set(locked.grader_set.keys)
        for index, spec in enumerate(specs):
            if spec.key in taken:
                raise DomainError(
                    f"the run already has a grader {spec.key!r}",
                    field=f"graders[{index}].key",
                    code="conflict",
                )
        locked.graders = [
            *(locked.graders or []),
            *(
                {
                    "key": s.key,
                    "kind": s.kind,
                    "config": s.config,
                    "gating": s.gating,
                    "version": s.version,
                }
                for s in specs
            ),
        ]
        locked.save(update_fields=["graders"])
    ids = list(
        Trial.objects.filter(run=run, status=Trial.Status.OK, replaced_by__isnull=True)
        .order_by("id")
        .values_list("id", flat=True)
    )
    written = 0
    for chunk in chunked(ids, GRADE_CHUNK):
        trials = list(
            Trial.objects.filter(id__in=chunk)
            .select_related("case")
            .defer("trajectory", "final_state")  # read by the ladder for agent graders only
        )
        written += grades_record(trials=trials, specs=specs)
    run.refresh_from_db(fields=["graders"])
    run.__dict__.pop("grader_set", None)
    return RunGradeSummary(keys=tuple(s.key for s in specs), trials=len(ids), grades=written)
