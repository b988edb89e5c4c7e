"""Deleting old runs (``manage.py runs_prune``) in bounded batches while workers run other runs.
docs/operations.md, "Deleting old runs".

**Which runs.** Finished runs only (succeeded, failed, cancelled; an imported run is one of
these) matching the filters (finished before ``now - older_than``; beyond the ``keep_last``
newest finished runs of their suite; in ``suite``; named by ``run_uuids``), and never a run
something else holds. What holds a run is read from Django's model meta, walking every
relation that reaches a run's rows (``_meta.related_objects``, through the CASCADE ones), so
evals imports no other app's model (docs/architecture.md):

- a PROTECT relation with rows holds it (a baseline, current or past; a top-up, as base or
  head; a calibration set drawn from it);
- a CASCADE relation named in ``RECORD_RELATIONS`` with rows holds it: records of people
  (human labels, their revisions, calibration items, adjudications, preferences and their
  order, a judge version's development labels) are never deleted by a prune;
- a relation in ``ACTIVE_RELATIONS`` holds it while a row is active (a judge run still
  judging it; an adaptive run still running against it);
- any other CASCADE relation from another app than evals holds it too, until it is listed
  in ``DELETED_RELATIONS`` (a new foreign key is kept safe until someone decides);
  tests/evals/test_prune.py checks every relation is classified.

**How.** Per run: (1) one short transaction locks the run row, checks it again, sets status
``pruning`` (neither live nor finished: no page, comparison, gate, cache or sweep reads it as
complete; the badge says "pruning") and writes the ``RunPrune`` record (who, when, via);
(2) its trials in batches of ``batch_size``, each batch its own transaction: the batch is
checked again for records of people, then its rows are deleted through Django's collector
(grades, decision transitions, judge calls, claims, pairs and their verdicts first, then the
trials); (3) the rows hanging on the run itself (judge runs, pair-only judge calls,
re-pricings) in batches the same way; (4) the run row (its stored ``RunSummary``) and the
record's end, one transaction. A killed prune leaves a run in ``pruning`` with whole batches
gone; the next prune, whatever its filters, finishes every run left in ``pruning`` first.
The run's grid column cache entry is deleted when it is marked; a comparison cached under
its UUID can no longer be reached (the run is not found) and expires within the hour
(``evals.comparison.cache``)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from django.core.cache import cache
from django.db import models, transaction
from django.db.models import F, ForeignObjectRel, Q
from django.db.models.functions import Coalesce, Length
from django.utils import timezone

from core.actors import Via, actor_text
from core.chunks import chunked
from core.errors import DomainError
from core.ids import uuid_parse
from core.roles import LEAD, role_require
from evals.grid.cache import grid_column_keys
from evals.models import Grade, Run, RunPrune, Suite, Trial

logger = logging.getLogger(__name__)

BATCH_SIZE_MAX = 100_000
# Candidate runs checked for what holds them per query (``IN`` lists stay short).
CHECK_CHUNK = 500

# CASCADE relations whose rows are records of people: a run reaching one is kept, with this
# reason. Keyed "app.Model.field" of the pointing model.
LABELS_REASON = "hold human labels"
RECORD_RELATIONS: dict[str, str] = {
    "labeling.Label.trial": LABELS_REASON,
    "labeling.LabelRevision.trial": LABELS_REASON,
    "labeling.CalibrationItem.trial": LABELS_REASON,
    "labeling.Adjudication.trial": LABELS_REASON,
    "labeling.PreferenceLabel.pair": LABELS_REASON,
    "labeling.PreferenceOrder.pair": LABELS_REASON,
    "judges.DevelopmentLabel.trial": LABELS_REASON,
    "labeling.ItemNote.item": "hold reviewers' notes",
    "labeling.ItemAssignment.item": "are assigned to reviewers",
}
# Relations that hold a run while a row matches (is still at work); any other row is no
# hold (SET_NULL or CASCADE as its field says).
ACTIVE_RELATIONS: dict[str, tuple[Q, str]] = {
    "judges.JudgeRun.run": (Q(status__in=("queued", "running")), "are being judged"),
    "judges.JudgeRun.base_run": (Q(status__in=("queued", "running")), "are being judged"),
    "evals.Run.against": (Q(status__in=("queued", "running")), "an adaptive run is using"),
}
# CASCADE relations from other apps whose rows go with the run: what a judge computed and
# spent on its trials, and its leases.
DELETED_RELATIONS = frozenset(
    {
        "judges.JudgeRun.run",
        "judges.JudgeRun.base_run",
        "judges.JudgeClaim.trial",
        "judges.JudgeClaim.pair",
        "judges.JudgeClaim.judge_run",
        "judges.JudgeCallRecord.run",
        "judges.JudgeCallRecord.trial",
        "judges.JudgeCallRecord.pair",
        "judges.PairwiseVerdict.pair",
    }
)
CHANGED_REASON = "changed since they were chosen (no longer finished, or now held)"
PROTECT_REASONS: dict[str, str] = {
    "evals.Baseline.run": "are named by a baseline (current or past)",
    "evals.TopUp.base": "are used by a top-up",
    "evals.TopUp.head": "are used by a top-up",
    "labeling.CalibrationSet.run": "have a calibration set drawn from them",
    "evals.ExperimentVariant.run": "are variants of an experiment",
}


@dataclass(frozen=True)
class Hold:
    """One relation reaching a run's rows: ``key`` "app.Model.field", ``model`` the pointing
    model, ``lookup`` the path from it to the run's id (``label__trial__run``), ``kind``
    ``protect``, ``record``, ``active``, ``unknown`` (a hold) or ``cascade`` (deleted)."""

    key: str
    model: type[models.Model]
    lookup: str
    kind: str

    @property
    def reason(self) -> str:
        """Why a run it holds is kept, for the report ("hold human labels")."""
        if self.kind == "record":
            return RECORD_RELATIONS[self.key]
        if self.kind == "active":
            return ACTIVE_RELATIONS[self.key][1]
        if self.kind == "protect":
            return PROTECT_REASONS.get(self.key, f"are protected by {self.key}")
        return f"have rows in {self.key}, not classified for pruning"

    def rows(self) -> models.QuerySet:
        """The pointing rows that hold (active ones only for an ``active`` relation)."""
        qs = self.model._default_manager.all()
        return qs.filter(ACTIVE_RELATIONS[self.key][0]) if self.kind == "active" else qs


def _relation_kind(key: str, model: type[models.Model], on_delete: Any) -> str:
    if key in ACTIVE_RELATIONS:
        return "active"
    if on_delete is models.PROTECT:
        return "protect"
    if key in RECORD_RELATIONS:
        return "record"
    if on_delete is models.CASCADE:
        if model._meta.app_label == "evals" or key in DELETED_RELATIONS:
            return "cascade"
        return "unknown"
    return "other"  # SET_NULL, SET_DEFAULT, DO_NOTHING: the row stays


def run_relations() -> list[Hold]:
    """Every relation reaching a run's rows, walked from ``Run`` through CASCADE relations
    (hidden ones included), each with its path to the run id and its kind (``Hold``)."""
    found: list[Hold] = []

    def walk(model: type[models.Model], to_run: str, seen: frozenset) -> None:
        for rel in model._meta.get_fields(include_hidden=True):
            if not isinstance(rel, ForeignObjectRel) or rel.many_to_many:
                continue
            related = cast(type[models.Model], rel.related_model)
            key = f"{related._meta.label}.{rel.field.name}"
            lookup = f"{rel.field.name}__{to_run}" if to_run else rel.field.name
            kind = _relation_kind(key, related, rel.on_delete)
            found.append(Hold(key=key, model=related, lookup=lookup, kind=kind))
            if kind in ("cascade", "record", "unknown") and related not in seen:
                walk(related, lookup, seen | {related})

    walk(Run, "", frozenset({Run}))
    return found


def runs_held(*, run_ids: Sequence[int]) -> dict[int, str]:
    """Run id -> why it is kept (the first hold found; ``Hold.reason``), for those of
    ``run_ids`` something holds. One query per relation per ``CHECK_CHUNK`` runs."""
    held: dict[int, str] = {}
    holds = [h for h in run_relations() if h.kind in ("protect", "record", "active", "unknown")]
    for chunk in chunked(list(run_ids), CHECK_CHUNK):
        for hold in holds:
            open_ids = [i for i in chunk if i not in held]
            if not open_ids:
                break
            rows = hold.rows().filter(**{f"{hold.lookup}__in": open_ids})
            for run_id in rows.values_list(hold.lookup, flat=True).distinct():
                held.setdefault(run_id, hold.reason)
    return held


def _trials_held(trial_ids: Sequence[int]) -> str | None:
    """Why a batch of trials may not go (a record of people or an unclassified row on one of
    them, written since the run was marked), or None."""
    for hold in run_relations():
        if hold.kind not in ("record", "unknown", "protect") or "__" not in hold.lookup:
            continue
        to_trial = hold.lookup.removesuffix("__run")
        if to_trial == hold.lookup:
            continue
        if hold.rows().filter(**{f"{to_trial}__in": trial_ids}).exists():
            return hold.reason
    return None


@dataclass
class PrunedRun:
    """A run pruned (or that would be): ``trials`` and ``grades`` counted (deleted, or there
    for a dry run), ``resumed`` when an interrupted prune was finished."""

    uuid: str
    name: str
    suite: str
    status: str
    trials: int = 0
    grades: int = 0
    resumed: bool = False

    def as_json(self) -> dict:
        """JSON-safe, the same keys."""
        return dict(self.__dict__)


@dataclass
class PruneReport:
    """What a prune did (or would do): ``runs`` pruned, ``kept`` reason -> runs matched but
    held (``runs_held``), ``deleted`` "app.Model" -> rows, ``batches`` short transactions,
    ``bytes_estimate`` the trials' output text in characters (dry run only; None otherwise),
    ``errors``: why runs stopped half-way (they stay "pruning"), one line each."""

    dry_run: bool
    runs: list[PrunedRun] = field(default_factory=list)
    kept: dict[str, int] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    bytes_estimate: int | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def trials(self) -> int:
        return sum(r.trials for r in self.runs)

    @property
    def grades(self) -> int:
        return sum(r.grades for r in self.runs)

    def kept_lines(self) -> list[str]:
        """ "kept: 2 runs hold human labels", one per reason."""
        return [
            f"kept: {n} run{'s' if n != 1 else ''} {_verb(reason, n)}"
            for reason, n in sorted(self.kept.items())
        ]

    def as_json(self) -> dict:
        """``{"dry_run", "runs", "trials", "grades", "kept", "deleted", "batches",
        "bytes_estimate", "errors"}``."""
        return {
            "dry_run": self.dry_run,
            "runs": [r.as_json() for r in self.runs],
            "trials": self.trials,
            "grades": self.grades,
            "kept": dict(sorted(self.kept.items())),
            "deleted": dict(sorted(self.deleted.items())),
            "batches": self.batches,
            "bytes_estimate": self.bytes_estimate,
            "errors": list(self.errors),
        }


def _verb(reason: str, n: int) -> str:
    # Reasons are written for many runs ("hold human labels"); one run "holds".
    if n == 1:
        for plural, single in (("hold ", "holds "), ("are ", "is "), ("have ", "has ")):
            if reason.startswith(plural):
                return single + reason.removeprefix(plural)
    return reason


def runs_prune(
    *,
    older_than: timedelta | None = None,
    suite: Suite | None = None,
    keep_last: int | None = None,
    run_uuids: Iterable[str] | None = None,
    dry_run: bool,
    batch_size: int = 5000,
    by: Any = None,
    via: str = Via.COMMAND,
    now: datetime | None = None,
) -> PruneReport:
    """Delete the finished runs the filters select, in batches (module docstring). Filters
    combine (all must hold); at least one of ``older_than``, ``keep_last``, ``run_uuids`` is
    required. ``older_than``: finished (else created) longer ago than this; ``keep_last``:
    keep each suite's N newest finished runs (by creation); ``batch_size``: trials per
    transaction (1 to ``BATCH_SIZE_MAX``). ``by``/``via``: recorded on each ``RunPrune``;
    the command line is the operator, any other ``via`` needs ``by`` to be a lead.
    Runs left "pruning" by an interrupted prune are finished first (not in a dry run).
    Raises ``DomainError`` (``invalid``; ``not_found`` for an unknown run UUID) and
    ``PermissionDenied`` (not a lead)."""
    if via != Via.COMMAND:
        role_require(by, LEAD, action="Pruning runs")
    _check(older_than=older_than, keep_last=keep_last, run_uuids=run_uuids, batch_size=batch_size)
    now = now or timezone.now()
    report = PruneReport(dry_run=dry_run)
    candidates = _candidates(
        older_than=older_than, suite=suite, keep_last=keep_last, run_uuids=run_uuids, now=now
    )
    held = runs_held(run_ids=[r.id for r in candidates])
    for reason in held.values():
        report.kept[reason] = report.kept.get(reason, 0) + 1
    chosen = [r for r in candidates if r.id not in held]
    resuming = list(Run.objects.filter(status=Run.Status.PRUNING).select_related("suite"))
    if dry_run:
        _dry_run_fill(report, [*resuming, *chosen], resumed={r.id for r in resuming})
        return report
    for run in [*resuming, *chosen]:
        try:
            pruned = _run_prune(run=run, batch_size=batch_size, by=by, via=via, report=report)
        except DomainError as exc:  # this run stays "pruning"; the others go on
            report.errors.append(f"run {run.ref_text}: {exc.message}")
            logger.warning("runs_prune stopped a run: %s", report.errors[-1])
            continue
        if pruned is None:
            report.kept[CHANGED_REASON] = report.kept.get(CHANGED_REASON, 0) + 1
        else:
            report.runs.append(pruned)
    return report


def _check(*, older_than, keep_last, run_uuids, batch_size) -> None:
    if older_than is None and keep_last is None and run_uuids is None:
        raise DomainError(
            "say which runs to prune: older_than, keep_last or run_uuids", field="older_than"
        )
    if older_than is not None and older_than <= timedelta(0):
        raise DomainError("older_than must be more than zero", field="older_than")
    if keep_last is not None and keep_last < 0:
        raise DomainError("keep_last must be 0 or more", field="keep_last")
    if not 1 <= batch_size <= BATCH_SIZE_MAX:
        raise DomainError(f"batch_size must be from 1 to {BATCH_SIZE_MAX:,}", field="batch_size")


def _candidates(*, older_than, suite, keep_last, run_uuids, now) -> list[Run]:
    """Finished runs matching every filter given, oldest first."""
    qs = Run.objects.finished().select_related("suite")
    if suite is not None:
        qs = qs.filter(suite=suite)
    if run_uuids is not None:
        wanted = set()
        for index, raw in enumerate(run_uuids):
            if (parsed := uuid_parse(raw)) is None:
                raise DomainError(f"not a run UUID: {raw!r}", field="run_uuids", record=index)
            wanted.add(parsed)
        known = set(Run.objects.filter(uuid__in=wanted).values_list("uuid", flat=True))
        if missing := sorted(wanted - known):
            raise DomainError(f"no run {missing[0]}", field="run_uuids", code="not_found")
        qs = qs.filter(uuid__in=wanted)
    if older_than is not None:
        qs = qs.annotate(done_at=Coalesce("finished_at", "created_at")).filter(
            done_at__lt=now - older_than
        )
    runs = list(qs.order_by("created_at", "id"))
    if keep_last is not None:
        newest = _newest_finished(suite_ids={r.suite_id for r in runs}, keep_last=keep_last)
        runs = [r for r in runs if r.id not in newest]
    return runs


def _newest_finished(*, suite_ids: set[int], keep_last: int) -> set[int]:
    """Ids of each suite's ``keep_last`` newest finished runs."""
    if keep_last == 0:
        return set()
    kept: set[int] = set()
    for suite_id in suite_ids:
        newest = Run.objects.finished().filter(suite_id=suite_id).order_by("-created_at", "-id")
        kept.update(newest.values_list("id", flat=True)[:keep_last])
    return kept


def _dry_run_fill(report: PruneReport, runs: list[Run], *, resumed: set[int]) -> None:
    ids = [r.id for r in runs]
    trials = Counter(
        dict(
            Trial.objects.filter(run_id__in=ids)
            .values("run_id")
            .annotate(n=models.Count("id"))
            .values_list("run_id", "n")
        )
    )
    grades = Counter(
        dict(
            Grade.objects.filter(trial__run_id__in=ids)
            .values("trial__run_id")
            .annotate(n=models.Count("id"))
            .values_list("trial__run_id", "n")
        )
    )
    for run in runs:
        report.runs.append(_pruned(run, trials=trials[run.id], grades=grades[run.id]))
        report.runs[-1].resumed = run.id in resumed
    report.bytes_estimate = _bytes_estimate(ids)


def _bytes_estimate(run_ids: list[int]) -> int:
    """The trials' output and error text in characters (about bytes for ASCII text); JSON
    columns, other tables and indexes are not counted: a lower bound."""
    total = 0
    for chunk in chunked(run_ids, CHECK_CHUNK):
        sums = Trial.objects.filter(run_id__in=chunk).aggregate(
            output=models.Sum(Length("output")),
            error=models.Sum(Length("error_message")),
        )
        total += (sums["output"] or 0) + (sums["error"] or 0)
    return total


def _pruned(run: Run, *, trials: int = 0, grades: int = 0) -> PrunedRun:
    return PrunedRun(
        uuid=str(run.uuid),
        name=run.name,
        suite=run.suite.name,
        status=run.status,
        trials=trials,
        grades=grades,
    )


def _run_prune(*, run: Run, batch_size: int, by, via: str, report: PruneReport) -> PrunedRun | None:
    """Mark, delete in batches and close one run; None when it changed since it was chosen
    (no longer finished, or now held). Raises ``DomainError`` (``conflict``) when a record
    of people appeared on a trial of a run being pruned: the run stays "pruning"."""
    record = _run_mark(run=run, by=by, via=via)
    if record is None:
        return None
    pruned = _pruned(run)
    pruned.status = record.status_before
    pruned.resumed = run.status == Run.Status.PRUNING
    while True:
        with transaction.atomic():
            ids = list(
                Trial.objects.filter(run_id=run.id)
                .order_by("id")
                .values_list("id", flat=True)[:batch_size]
            )
            if not ids:
                break
            if reason := _trials_held(ids):
                raise DomainError(
                    f"its trials {_verb(reason, 2)} since it was marked; it stays 'pruning'",
                    field="run",
                    code="conflict",
                )
            # Only ids: the collector loads the trials it deletes, outputs and all otherwise.
            counts = _delete(Trial.objects.filter(id__in=ids).only("id"), record, report)
        pruned.trials += counts.get("evals.Trial", 0)
        pruned.grades += counts.get("evals.Grade", 0)
    for hold in run_relations():
        if hold.kind == "cascade" and hold.lookup == hold.lookup.split("__")[0]:
            _relation_delete(
                hold, run_id=run.id, batch_size=batch_size, record=record, report=report
            )
    with transaction.atomic():
        _delete(Run.objects.filter(id=run.id), record, report)
        RunPrune.objects.filter(id=record.id).update(finished_at=timezone.now())
    record.refresh_from_db()
    pruned.trials, pruned.grades = record.trials, record.grades
    logger.info(
        "runs_prune: run %s deleted %s: %d trials, %d grades in %d batches",
        run.ref_text,
        actor_text(by=record.by, via=record.via),
        record.trials,
        record.grades,
        record.batches,
    )
    return pruned


def _run_mark(*, run: Run, by, via: str) -> RunPrune | None:
    """Lock the run, check it again and mark it "pruning" with its record; the record of an
    interrupted prune when it is already marked; None when it may not go any more."""
    keys = grid_column_keys(runs=[run]) if run.status != Run.Status.PRUNING else {}
    with transaction.atomic():
        locked = Run.objects.select_for_update().filter(id=run.id).first()
        if locked is None:
            return None
        if locked.status == Run.Status.PRUNING:
            record = RunPrune.objects.filter(run=locked, finished_at=None).first()
            return record or _record(locked, by=by, via=via, status_before="")
        if not locked.is_terminal or runs_held(run_ids=[locked.id]):
            return None
        record = _record(locked, by=by, via=via, status_before=locked.status)
        Run.objects.filter(id=locked.id).update(status=Run.Status.PRUNING)
    if key := keys.get(run.id):
        cache.delete(key)
    return record


def _record(run: Run, *, by, via: str, status_before: str) -> RunPrune:
    user = by if by is not None and by.is_authenticated else None
    return RunPrune.objects.create(
        run=run,
        run_uuid=run.uuid,
        run_name=run.name,
        suite_id=run.suite_id,
        status_before=status_before,
        by=user,
        via=via,
    )


def _relation_delete(hold: Hold, *, run_id: int, batch_size: int, record, report) -> None:
    """A relation's rows hanging on the run itself, ``batch_size`` per transaction."""
    rows = hold.model._default_manager.filter(**{hold.lookup: run_id})
    while True:
        with transaction.atomic():
            ids = list(rows.order_by("pk").values_list("pk", flat=True)[:batch_size])
            if not ids:
                return
            _delete(hold.model._default_manager.filter(pk__in=ids), record, report)


def _delete(qs: models.QuerySet, record: RunPrune, report: PruneReport) -> dict[str, int]:
    """Delete ``qs`` with what cascades from it, in the caller's transaction, adding the
    counts to ``record`` and ``report`` (one batch)."""
    _, counts = qs.delete()
    counts = {label: n for label, n in counts.items() if n}
    locked = RunPrune.objects.select_for_update().get(id=record.id)
    deleted = Counter(locked.deleted)
    deleted.update(counts)
    RunPrune.objects.filter(id=record.id).update(
        trials=F("trials") + counts.get("evals.Trial", 0),
        grades=F("grades") + counts.get("evals.Grade", 0),
        deleted=dict(deleted),
        batches=F("batches") + 1,
    )
    for label, n in counts.items():
        report.deleted[label] = report.deleted.get(label, 0) + n
    report.batches += 1
    return counts


def runs_pruned_count(*, suite: Suite) -> int:
    """How many of ``suite``'s runs prunes have deleted (finished ``RunPrune`` records)."""
    return RunPrune.objects.filter(suite=suite, finished_at__isnull=False).count()
