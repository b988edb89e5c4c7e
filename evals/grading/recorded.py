"""Grading recorded outputs: a finished run's ok trials graded after the fact by new
deterministic graders (``contract`` included), so imported and ingested outputs, and
outputs of a harness a team keeps, are judged by the same rules as Assay's own runs.

The new graders join the run's grader set (``Run.graders``) under new keys, so the run
report, the comparison, the gate, the exports and the API read them like any other.
"""

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
    """What ``run_grade`` did: the new grader ``keys``, the ok ``trials`` graded and the
    ``grades`` written."""

    keys: tuple[str, ...]
    trials: int
    grades: int


def run_grade(*, run: Run, graders: list[dict], by=None) -> RunGradeSummary:
    """Grade ``run``'s ok trials (the current attempts: retried ones are history) with
    ``graders`` (a grader set as JSON, parsed strictly) under new keys appended to its
    grader set; engineers and leads (``by`` None: a command).

    Idempotent per (trial, grader) through the grades' unique key; a key already in the
    run's set is refused, so a second call with the same file changes nothing. Raises
    PermissionDenied, or ``DomainError``: ``run`` (not finished: ``conflict``),
    ``graders[i].kind`` (a judge: judges grade through a judge run), ``graders[i].key``
    (already in the run's set: ``conflict``), or any grader config error.
    """
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
