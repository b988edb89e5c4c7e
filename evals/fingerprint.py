"""Run fingerprints: whether what a reader reads of a finished run has changed since.

Why: the grid of runs caches each finished run's column (``evals.grid.cache``) and the
comparison stores each finished run's summary (``evals.comparison.summary``); both may
serve a stored value only while the run's trials and grades are as they were. The rule
lived twice and differed (the grid's key missed a grade regraded in place); it lives here.

Invariant: a run's fingerprint (``RunFingerprint.key``) moves with every change a reader
of the run can see:

1. the run's status, trials per case and a digest of its stored grader set (which a
   recorded judge's grading can extend);
2. its trials: their count, largest id, id sum, the id sums of the ok, errored and open
   (queued or running) ones and the retried (``replaced_by`` set) count. A new trial (a
   top-up round, a retry), a retry marking its errored trial replaced, a trial settling
   or changing status in place moves one of them;
3. its grades, per grader: their count, largest id, id sum, the id sums of the passing,
   failing, errored and gating ones and the sum of their judge versions' ids. A new grade
   (a judge run or an import of labels grading the run after it finished) moves the
   count; a grade changed in place (a regrade: ``passed`` or ``status`` updated on the
   same row, as ``test_a_regraded_trial_is_seen_at_once_despite_the_comparison_cache``
   does; its gating flag or judge version) moves the id sum of the verdict it left and of
   the one it took, so even two regrades in opposite directions move them (their ids
   differ). Only several changes whose id sums cancel exactly could go unseen (or two
   grades of one grader swapping judge versions). A grade's score, reason and details are
   read by no cached value and are not part of the fingerprint.

A run that is not finished has no key (``None``): nothing of it is stored; its ``state``
(the same text) keys what is cached of it for a while
(``evals.comparison.summary.detectable_drop_get``). What else a reader depends on it adds
itself from here: the comparison adds judge trust (``judge_trust_fingerprint``) and its
suite's case changes (``case_changes_fingerprints``).

Cost: one query for any number of runs, whatever their size (trials and grades in one
``UNION ALL``). The trials' side reads the ``trial_run_readable`` index only (it holds the
trial's id: ``evals.models.Trial.Meta.indexes``), never the trial rows and their outputs;
the grades' side joins those trial ids to the run's grades. At 2,000 cases x 5 trials a
side on PostgreSQL this replaced four aggregate queries that read every trial row twice
(5,317 buffers for the key's trials and grades, now 577).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import models

from core.db import raw_rows
from evals.grading.rungs import judge_rung
from evals.models import CaseChange, Grade, Run, Trial


@dataclass(frozen=True)
class RunFingerprint:
    """One run's fingerprint: ``state`` (text, ~50 characters: the run's status, trials per
    case and a digest of the rest, for any run), ``key`` (``state`` when the run is
    finished, else None: what caches and stored reads key on) and ``graded``: the graders
    with a grade on any of its trials (finished or not; the grid's column reader needs
    them, ``evals.grid.cells.runs_gating_keys``)."""

    state: str
    key: str | None
    graded: frozenset[str]


def run_fingerprints(*, runs: Sequence[Run]) -> dict[int, RunFingerprint]:
    """Run id -> ``RunFingerprint`` for each of ``runs`` (module docstring for what the key
    holds). One query whatever the number of runs, cases, trials and grades; none when
    ``runs`` is empty. Raises nothing."""
    if not runs:
        return {}
    ids = [r.id for r in runs]

    def ids_sum(**condition) -> models.Sum:
        return models.Sum("id", filter=models.Q(**condition))

    # (run id, grader, count, largest id, id sum, a, b, c, d, e); a trial's row has no
    # grader (a grade always has one). Trials: a, b, c the id sums of the ok, errored and
    # open ones (the cancelled are the rest), d the retried count. Grades: a, b, c the id
    # sums of the passing, failing and errored ones (the not judged are the rest), d of the
    # gating ones, e the sum of their judge versions' ids.
    trials = (
        Trial.objects.filter(run_id__in=ids)
        .order_by()
        .values("run_id")
        .annotate(
            g=models.Value(None, output_field=models.CharField()),
            n=models.Count("id"),
            top=models.Max("id"),
            s=models.Sum("id"),
            a=ids_sum(status=Trial.Status.OK),
            b=ids_sum(status=Trial.Status.ERROR),
            c=ids_sum(status__in=(Trial.Status.QUEUED, Trial.Status.RUNNING)),
            d=models.Count("replaced_by_id"),
            e=models.Value(None, output_field=models.BigIntegerField()),
        )
        .values_list("run_id", "g", "n", "top", "s", "a", "b", "c", "d", "e")
    )
    grades = (
        Grade.objects.filter(trial__run_id__in=ids)
        .order_by()
        .values("trial__run_id", "grader")
        .annotate(
            n=models.Count("id"),
            top=models.Max("id"),
            s=models.Sum("id"),
            a=ids_sum(passed=True),
            b=ids_sum(passed=False),
            c=ids_sum(status=Grade.Status.ERROR),
            d=ids_sum(gating=True),
            e=models.Sum("judge_version_id"),
        )
        .values_list("trial__run_id", "grader", "n", "top", "s", "a", "b", "c", "d", "e")
    )
    groups: dict[int, list[tuple]] = {i: [] for i in ids}
    graded: dict[int, set[str]] = {i: set() for i in ids}
    for run_id, grader, *sums in raw_rows(trials.union(grades, all=True)):
        # Sums arrive as int or Decimal (PostgreSQL's sum of bigint), null when empty.
        groups[run_id].append(
            (grader is None, grader or "", *(0 if x is None else int(x) for x in sums))
        )
        if grader is not None:
            graded[run_id].add(grader)
    out = {}
    for run in runs:
        digest = hashlib.sha256(
            json.dumps([run.graders, sorted(groups[run.id])], sort_keys=True, default=str).encode()
        ).hexdigest()[:32]
        state = f"{run.status}:{run.trials_per_case}:{digest}"
        out[run.id] = RunFingerprint(
            state=state,
            key=state if run.is_terminal else None,
            graded=frozenset(graded[run.id]),
        )
    return out


# The judge trust fingerprint with no judge rung registered: the text of no approval.
NO_JUDGE_TRUST = "j0.None.0"


def judge_trust_fingerprint() -> str:
    """Text that moves with every grant and revocation of judge trust (each writes or
    updates a ``judges.models.JudgeApproval``: their count, newest id and revocations), from
    the registered judge rung (``JudgeRung.trust_fingerprint``; ``NO_JUDGE_TRUST`` without
    one). One query."""
    rung = judge_rung()
    return NO_JUDGE_TRUST if rung is None else rung.trust_fingerprint()


def case_changes_fingerprints(*, suite_ids: Iterable[int]) -> dict[int, str]:
    """Suite id -> text that moves with every recorded change of its cases
    (``evals.models.CaseChange``: count and newest id; a retag in place writes one), for
    each of ``suite_ids``. One query."""
    suite_ids = set(suite_ids)
    changes = {
        row["suite_id"]: row
        for row in CaseChange.objects.filter(suite_id__in=suite_ids)
        .order_by()
        .values("suite_id")
        .annotate(n=models.Count("id"), top=models.Max("id"))
    }
    return {
        i: f"c{changes[i]['n']}.{changes[i]['top']}" if i in changes else "c0.None"
        for i in suite_ids
    }
