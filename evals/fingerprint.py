"""Run fingerprints: whether what a reader reads of a finished run has changed since.

Why: the grid of runs caches each finished run's column (``evals.grid.cache``) and the
comparison stores each finished run's summary (``evals.comparison.summary``); both may
serve a stored value only while the run's trials and grades are as they were. The rule
lived twice and differed (the grid's key missed a grade regraded in place); it lives here.

Invariant: a run's fingerprint (``RunFingerprint.key``) moves with every change a reader
of the run can see:

1. the run's status, trials per case and a digest of its stored grader set (which a
   recorded judge's grading can extend);
2. its trials, grouped by status: each group's count, largest id, id sum and retried
   (``replaced_by`` set) count. A new trial (a top-up round, a retry), a retry marking
   its errored trial replaced, a trial settling or changing status in place moves a
   group's count or id sum;
3. its grades, grouped by everything a reader reads of a grade (grader, status, passed,
   gating, judge version): each group's count, largest id and id sum. A new grade (a
   judge run or an import of labels grading the run after it finished) moves its group's
   count; a grade changed in place (a regrade: ``passed`` or ``status`` updated on the
   same row, as ``test_a_regraded_trial_is_seen_at_once_despite_the_comparison_cache``
   does) leaves one group for another, moving both groups' counts and id sums, so even
   two regrades in opposite directions move the sums (their ids differ). Only several
   changes whose id sums cancel exactly could go unseen. A grade's score, reason and
   details are read by no cached value and are not part of the fingerprint.

A run that is not finished has no key (``None``): nothing of it is cached. What else a
reader depends on it adds itself from here: the comparison adds judge trust
(``judge_trust_fingerprint``) and its suite's case changes (``case_changes_fingerprints``).

Cost: one query for any number of runs, whatever their size (trials and grades in one
``UNION ALL``). The trials' side reads the ``trial_run_readable`` index only (it holds the
trial's id: ``evals.models.Trial.Meta.indexes``), never the trial rows and their outputs;
the grades' side joins those trial ids to the run's grades. At 2,000 cases x 5 trials a
side on PostgreSQL this replaced four aggregate queries that read every trial row twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import models

from core.db import raw_rows
from evals.models import CaseChange, Grade, Run, Trial
from judges.models import JudgeApproval


@dataclass(frozen=True)
class RunFingerprint:
    """One run's fingerprint: ``key`` (text, ~60 characters; None when the run is not
    finished) and ``graded``: the graders with a grade on any of its trials (finished or
    not; the grid's column reader needs them, ``evals.grid.cells.runs_gating_keys``)."""

    key: str | None
    graded: frozenset[str]


def run_fingerprints(*, runs: Sequence[Run]) -> dict[int, RunFingerprint]:
    """Run id -> ``RunFingerprint`` for each of ``runs`` (module docstring for what the key
    holds). One query whatever the number of runs, cases, trials and grades; none when
    ``runs`` is empty. Raises nothing."""
    if not runs:
        return {}
    ids = [r.id for r in runs]
    text = models.CharField()
    nothing = {
        name: models.Value(None, output_field=field)
        for name, field in (
            ("g", text),
            ("p", models.BooleanField()),
            ("k", models.BooleanField()),
            ("v", models.BigIntegerField()),
        )
    }
    # (run id, status, grader, passed, gating, judge version, count, top, id sum, retried);
    # a trial's row has no grader (a grade always has one).
    trials = (
        Trial.objects.filter(run_id__in=ids)
        .order_by()
        .values("run_id", "status")
        .annotate(
            **nothing,
            n=models.Count("id"),
            top=models.Max("id"),
            s=models.Sum("id"),
            r=models.Count("replaced_by_id"),
        )
        .values_list("run_id", "status", "g", "p", "k", "v", "n", "top", "s", "r")
    )
    grades = (
        Grade.objects.filter(trial__run_id__in=ids)
        .order_by()
        .values("trial__run_id", "status", "grader", "passed", "gating", "judge_version_id")
        .annotate(
            n=models.Count("id"),
            top=models.Max("id"),
            s=models.Sum("id"),
            r=models.Value(0, output_field=models.IntegerField()),
        )
        .values_list(
            "trial__run_id",
            "status",
            "grader",
            "passed",
            "gating",
            "judge_version_id",
            "n",
            "top",
            "s",
            "r",
        )
    )
    groups: dict[int, list[tuple]] = {i: [] for i in ids}
    graded: dict[int, set[str]] = {i: set() for i in ids}
    for run_id, status, grader, passed, gating, version, n, top, total, retried in raw_rows(
        trials.union(grades, all=True)
    ):
        # Booleans arrive as 0/1 on SQLite and True/False on PostgreSQL: one text either way.
        groups[run_id].append(
            (
                "t" if grader is None else "g",
                status,
                grader or "",
                _bit(passed),
                _bit(gating),
                version or 0,
                int(n),
                int(top),
                int(total),
                int(retried),
            )
        )
        if grader is not None:
            graded[run_id].add(grader)
    out = {}
    for run in runs:
        key = None
        if run.is_terminal:
            digest = hashlib.sha256(
                json.dumps(
                    [run.graders, sorted(groups[run.id])], sort_keys=True, default=str
                ).encode()
            ).hexdigest()[:32]
            key = f"{run.status}:{run.trials_per_case}:{digest}"
        out[run.id] = RunFingerprint(key=key, graded=frozenset(graded[run.id]))
    return out


def judge_trust_fingerprint() -> str:
    """Text that moves with every grant and revocation of judge trust (each writes or
    updates a ``judges.models.JudgeApproval``: their count, newest id and revocations).
    One query."""
    trust = JudgeApproval.objects.aggregate(
        n=models.Count("id"), top=models.Max("id"), revoked=models.Count("revoked_at")
    )
    return f"j{trust['n']}.{trust['top']}.{trust['revoked']}"


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


def _bit(value: object) -> int:
    """0/1 for a stored boolean, -1 for null."""
    return -1 if value is None else int(bool(value))
