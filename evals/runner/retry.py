"""Retrying a failed run's errored trials: each gets a new attempt, the errored one is kept as
history (``Trial.replaced_by``, out of every figure), and the run is finalized again."""

from __future__ import annotations

from collections import Counter

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest

from core.errors import DomainError
from core.roles import ENGINEER, LEAD, role_require
from evals.models import Run, Trial
from evals.runner.start import trials_add


def run_retry(*, run: Run, by=None) -> list[int]:
    """Retry every errored trial of finished ``run``; engineers and leads (``by`` None: a command).
    Returns the new trial ids; idempotent per trial. Raises PermissionDenied, or ``DomainError``
    (``run``) when not finished or nothing is left to retry."""
    if by is not None:
        role_require(by, ENGINEER, LEAD, action="retrying errored trials")
    with transaction.atomic():
        errored = list(
            Trial.objects.select_for_update()
            .filter(run=run, status=Trial.Status.ERROR, replaced_by__isnull=True)
            .order_by("case_id", "attempt")
            .values_list("id", "case_id")
        )
        if not errored:
            raise DomainError(f"run {run.name!r} has no errored trial to retry", field="run")
        new_ids = trials_add(run=run, per_case=dict(Counter(c for _, c in errored)))
        new_by_case: dict[int, list[int]] = {}
        for tid, cid in (
            Trial.objects.filter(id__in=new_ids)
            .order_by("case_id", "attempt")
            .values_list("id", "case_id")
        ):
            new_by_case.setdefault(cid, []).append(tid)
        for trial_id, case_id in errored:
            Trial.objects.filter(id=trial_id).update(replaced_by_id=new_by_case[case_id].pop(0))
        # The replaced attempts are history: out of the run's counters, so its trials stay
        # the same finished/planned figure (``evals.run_status.run_trial_count``): planned
        # as before (``trials_add`` counted the new attempts), finished and errored less
        # the replaced ones until the new attempts finish.
        n = len(errored)
        Run.objects.filter(id=run.id).update(
            trials_total=Greatest(F("trials_total") - n, 0),
            trials_finished=Greatest(F("trials_finished") - n, 0),
            trials_errored=Greatest(F("trials_errored") - n, 0),
        )
    return new_ids
