"""Run fingerprints: whether what a reader reads of a finished run has changed since.

The one rule for the grid's column cache and the comparison's stored summaries: a value is
served only while its run's ``RunFingerprint.key`` is unchanged. The key moves with the
run's status, trials per case and grader set digest; its trials (count, largest id, id sum,
id sums by status, retried count); its re-pricings (count, largest id, id sum); its grades
per grader (count, largest id, id sum, id sums of passing, failing, errored and gating
grades, judge version ids). A regrade in place
moves the id sums of the verdict it left and took; only changes cancelling exactly could go
unseen. A run not finished has no key; its ``state`` keys short-lived caches. Judge trust and
case changes have their own fingerprints here. One ``UNION ALL`` query for any number of
runs, reading the ``trial_run_readable`` index, never trial rows."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import models

from core.db import raw_rows
from evals.grading.rungs import judge_rung
from evals.models import CaseChange, Grade, Run, RunReprice, Trial


@dataclass(frozen=True)
class RunFingerprint:
    """One run's fingerprint: ``state`` (~50 characters: status, trials per case, a digest of the
    rest), ``key`` (``state`` when finished, else None) and ``graded``: the graders with a
    grade on any of its trials (``evals.grid.cells.runs_gating_keys`` needs them)."""

    state: str
    key: str | None
    graded: frozenset[str]


def run_fingerprints(*, runs: Sequence[Run]) -> dict[int, RunFingerprint]:
    """Run id -> ``RunFingerprint`` for each of ``runs``; one query, none for no runs."""
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
    # A re-pricing changes costs in place (``evals.reprice``): its count, largest id and id
    # sum, a row without a grader as a trial's is (the digest tells them apart).
    reprices = (
        RunReprice.objects.filter(run_id__in=ids)
        .order_by()
        .values("run_id")
        .annotate(
            g=models.Value(None, output_field=models.CharField()),
            n=models.Count("id"),
            top=models.Max("id"),
            s=models.Sum("id"),
            a=models.Value(None, output_field=models.BigIntegerField()),
            b=models.Value(None, output_field=models.BigIntegerField()),
            c=models.Value(None, output_field=models.BigIntegerField()),
            d=models.Value(None, output_field=models.BigIntegerField()),
            e=models.Value(None, output_field=models.BigIntegerField()),
        )
        .values_list("run_id", "g", "n", "top", "s", "a", "b", "c", "d", "e")
    )
    groups: dict[int, list[tuple]] = {i: [] for i in ids}
    graded: dict[int, set[str]] = {i: set() for i in ids}
    for run_id, grader, *sums in raw_rows(trials.union(grades, reprices, all=True)):
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
    """Text that moves with every grant and revocation of judge trust, from the registered judge
    rung (``JudgeRung.trust_fingerprint``; ``NO_JUDGE_TRUST`` without one). One query."""
    rung = judge_rung()
    return NO_JUDGE_TRUST if rung is None else rung.trust_fingerprint()


def case_changes_fingerprints(*, suite_ids: Iterable[int]) -> dict[int, str]:
    """Suite id -> text moving with every ``CaseChange`` of its cases. One query."""
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
