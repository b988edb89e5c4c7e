"""Writing imported trials in batches: cases upserted by content, then trials, grades and
labels as plain inserts, each batch checked against the cases seen so far."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone

from core.db import raw_rows, rows_insert, values_insert
from core.ids import uuid4_many
from evals.cases import CaseSpec
from evals.grading.grader_set import IMPORTED_KIND
from evals.models import Case, Grade, Run, Trial
from interop.importers.context import BATCH_SIZE, ImportContext, run_finish
from interop.importers.reader import record_error
from labeling.models import Label

# A batch is also written once its outputs reach this many characters (memory bound).
BATCH_CHARS = 32 * 1024 * 1024
# The columns each trial and grade row gives, in order (``core.db.values_insert``: a tuple
# per row, no dict; the trial's other columns take their defaults, all null).
_TRIAL_COLUMNS = (
    "uuid",
    "run_id",
    "case_id",
    "attempt",
    "status",
    "error_message",
    "output",
    "raw_response",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    "cache_write_tokens",
    "cache_read_tokens",
    "reasoning_tokens",
    "cost_usd",
    "trajectory",
    "final_state",
    "created_at",
    "finished_at",
)
_GRADE_COLUMNS = (
    "trial_id",
    "grader",
    "grader_version",
    "judge_version_id",
    "status",
    "passed",
    "score",
    "reason",
    "details",
    "gating",
    "created_at",
)


class TrialsWriter:
    """Writes one new imported run's trials, grades and labels inside the caller's transaction,
    in batches of ``batch_size`` trials or ``BATCH_CHARS`` characters of output. ``add`` raises
    ``DomainError`` naming both rows for a repeated (case_id, attempt) or one key with two
    contents; ``finish`` writes the rest and closes the run (``run_finish``). Counts go to
    ``ctx.summary``."""

    def __init__(self, *, ctx: ImportContext, run: Run, batch_size: int = BATCH_SIZE) -> None:
        self.ctx, self.run, self.batch_size = ctx, run, batch_size
        self._chars = 0
        self.added = 0  # specs accepted by ``add``
        self.trials = 0  # trials written
        self.finished = 0  # of them, finished (ok or error; not cancelled)
        self.errored = 0  # of them, errored (status "error")
        self._max_attempt = 1
        self._seen_attempts: dict[tuple[str, int], str] = {}
        self._seen_cases: dict[str, tuple[CaseSpec, str]] = {}
        self._graders: dict[str, dict] = {}
        self._batch: list[TrialSpec] = []
        self._last_id = 0  # the largest trial id written so far

    def add(self, spec: TrialSpec) -> None:
        """Queue one trial; writes a batch when it is full."""
        ident = (spec.case_key, spec.attempt)
        first = self._seen_attempts.setdefault(ident, spec.where)
        if first != spec.where:
            raise record_error(
                spec.where,
                "attempt",
                f"case {spec.case_key!r} attempt {spec.attempt} already given on {first}",
                record=spec.index,
            )
        if spec.case is not None:
            known = self._seen_cases.setdefault(spec.case_key, (spec.case, spec.where))
            if (
                known[1] != spec.where
                and known[0] is not spec.case  # one checked content (trial_row.CaseMemo)
                and not _same_content(known[0], spec.case)
            ):
                raise record_error(
                    spec.where,
                    "input",
                    f"case {spec.case_key!r} has different input/expected than on {known[1]}",
                    record=spec.index,
                )
        self._max_attempt = max(self._max_attempt, spec.attempt)
        self.added += 1
        self._batch.append(spec)
        self._chars += len(spec.output)
        if len(self._batch) >= self.batch_size or self._chars >= BATCH_CHARS:
            self._flush()

    def finish(self) -> None:
        """Write what is queued and mark the run succeeded with its counts and grader set."""
        self._flush()
        run_finish(
            self.run,
            trials=self.finished,
            errored=self.errored,
            cancelled=self.trials - self.finished,  # stored, never run: said apart
            graders=list(self._graders.values()),
            trials_per_case=self._max_attempt,
        )

    def _flush(self) -> None:
        if self._batch:
            self._last_id = _write_batch(
                self.ctx, self.run, self._batch, self._graders, self._last_id
            )
            self.trials += len(self._batch)
            self.finished += sum(1 for spec in self._batch if spec.status in Trial.FINISHED)
            self.errored += sum(1 for spec in self._batch if spec.status == Trial.Status.ERROR)
            self._batch, self._chars = [], 0


def _same_content(a: CaseSpec, b: CaseSpec) -> bool:
    """Same input and expected: strings and nulls compared directly, anything else by content
    hash (canonical JSON: 1 and 1.0 differ, as in the stored case)."""
    plain = (str, type(None))
    if (
        type(a.input) is str
        and type(b.input) is str
        and type(a.expected) in plain
        and type(b.expected) in plain
        and _same_goal(a, b)
    ):
        return a.input == b.input and a.expected == b.expected
    return a.content_hash == b.content_hash


def _same_goal(a: CaseSpec, b: CaseSpec) -> bool:
    return a.goal_state is None and b.goal_state is None


def _write_batch(
    ctx: ImportContext, run: Run, batch: list[TrialSpec], graders: dict, after_id: int
) -> int:
    """Write one batch: cases (``cases_upsert``), then trials, grades and labels as plain rows
    (``rows_insert``). Trial ids are read back by (case, attempt) above ``after_id`` (ids only
    grow and nobody else writes into this uncommitted run); returns the largest. Long by design:
    the steps share the ids each returns."""
    cases: dict[str, Case] = {}
    new_specs: dict[str, CaseSpec] = {}
    for spec in batch:
        if spec.case is not None:
            new_specs.setdefault(spec.case_key, spec.case)
    if new_specs:
        cases.update(ctx.cases_upsert(list(new_specs.values())))
    lookup = {s.case_key for s in batch if s.case is None} - cases.keys()
    if lookup:
        found = {c.key: c for c in Case.objects.active().filter(suite=ctx.suite, key__in=lookup)}
        for spec in batch:
            if spec.case is None and spec.case_key not in found and spec.case_key not in cases:
                raise record_error(
                    spec.where,
                    "case_id",
                    f"case {spec.case_key!r} is not in suite "
                    f"{ctx.suite.name!r} and the row has no input",
                    record=spec.index,
                )
        cases.update(found)
    ctx.cases_seen(cases.values())
    now = timezone.now()
    run_id = run.id
    case_ids = {key: case.id for key, case in cases.items()}
    started = run.started_at
    values_insert(
        Trial,
        _TRIAL_COLUMNS,
        [
            (
                trial_uuid,
                run_id,
                case_ids[spec.case_key],
                spec.attempt,
                spec.status,
                spec.error,
                spec.output,
                {
                    "format": "tabular",
                    "row": spec.where,
                    "model": spec.model or None,
                    "extra": spec.raw,
                },
                spec.latency_ms,
                spec.input_tokens,
                spec.output_tokens,
                spec.cache_write_tokens,
                spec.cache_read_tokens,
                spec.reasoning_tokens,
                spec.cost_usd,
                spec.trajectory,
                spec.final_state,
                spec.created_at or now,
                spec.created_at or started,
            )
            for spec, trial_uuid in zip(batch, uuid4_many(len(batch)), strict=True)
        ],
    )
    written = raw_rows(  # ints only: straight from the cursor
        Trial.objects.filter(run=run, id__gt=after_id).values_list("id", "case_id", "attempt")
    )
    trial_ids = {(case_id, attempt): pk for pk, case_id, attempt in written}
    grades, labels = [], []
    for spec in batch:
        trial_id = trial_ids[(case_ids[spec.case_key], spec.attempt)]
        for g in spec.grades:
            if g.grader not in graders:
                graders[g.grader] = {"key": g.grader, "kind": IMPORTED_KIND, "gating": True}
            grades.append(
                (
                    trial_id,
                    g.grader,
                    "imported",
                    None,
                    g.status,
                    g.passed,
                    g.score,
                    g.reason,
                    g.details,
                    True,
                    now,
                )
            )
        for lab in spec.labels:
            labels.append(
                {
                    "trial_id": trial_id,
                    "reviewer_id": None,
                    "reviewer_name": lab.reviewer,
                    "verdict": lab.verdict,
                    "critique": lab.critique,
                    "source": Label.Source.IMPORT,
                    "details": {"source": spec.where},
                    "version": 1,
                    "created_at": now,
                    "updated_at": now,
                }
            )
    values_insert(Grade, _GRADE_COLUMNS, grades)
    rows_insert(Label, labels)
    ctx.summary.trials += len(batch)
    ctx.summary.grades += len(grades)
    ctx.summary.labels += len(labels)
    return max(trial_ids.values(), default=after_id)


@dataclass
class GradeSpec:
    grader: str
    passed: bool | None
    score: float | None
    status: str
    reason: str
    details: dict = field(default_factory=dict)


@dataclass(frozen=True)
class LabelSpec:
    """A human label recorded elsewhere: reviewer name, verdict ``pass``/``fail``, critique."""

    reviewer: str
    verdict: str
    critique: str = ""


@dataclass
class TrialSpec:
    where: str
    case_key: str
    case: CaseSpec | None
    attempt: int
    output: str
    model: str
    created_at: datetime | None
    input_tokens: int | None
    output_tokens: int | None
    latency_ms: float | None
    cost_usd: Decimal | None
    grades: list[GradeSpec]
    raw: dict
    index: int | None = None
    labels: list[LabelSpec] = field(default_factory=list)
    # ``ok``, ``error`` with its message, or ``cancelled`` (``trial_row.trial_status``).
    status: str = Trial.Status.OK
    error: str = ""
    # An agent's ordered steps (``evals.trajectory.steps``, parsed) and final state.
    trajectory: list[dict] | None = None
    final_state: Any = None
    # The cache and reasoning token classes (docs/costs.md); only a run export gives them.
    cache_write_tokens: int | None = None
    cache_read_tokens: int | None = None
    reasoning_tokens: int | None = None
