"""The runs' metrics (docs/operations.md): trials Assay executed that finished, by status
(a counter, counted when their write commits), and the live work read at scrape time: runs
and trials queued or running, and the age of the oldest queued trial. The scrape reads the
live runs on the ``run_live`` partial index, then their trials on ``(run, status)``: its cost
grows with the work in flight, not with the trial table."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import partial

from django.db import transaction
from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client import Counter
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from evals.models import Run, Trial

TRIALS_FINISHED = Counter(
    "assay_trials_finished",
    "Trials executed by Assay that ended, by status (ok, error, cancelled); imported trials "
    "are not counted.",
    ["status"],
)

LIVE_STATUSES = (Trial.Status.QUEUED, Trial.Status.RUNNING)


def trials_finished_count(**by_status: int) -> None:
    """Count ``by_status`` (``ok=3, error=1``) once the current transaction commits (at once
    outside one), so a rolled-back write counts nothing."""
    counts = {status: n for status, n in by_status.items() if n}
    if counts:
        transaction.on_commit(partial(_count, counts))


def _count(counts: dict[str, int]) -> None:
    for status, n in counts.items():
        TRIALS_FINISHED.labels(status).inc(n)


def evals_gauges(*, now: datetime | None = None) -> Iterable[Metric]:
    """``assay_runs{status}``, ``assay_trials{status}`` (queued, running: of runs queued or
    running) and ``assay_trial_oldest_queued_age_seconds`` (since the trial was created; 0
    when none is queued). Two queries."""
    now = now or timezone.now()
    runs = GaugeMetricFamily("assay_runs", "Runs queued or running, by status.", labels=["status"])
    trials = GaugeMetricFamily(
        "assay_trials", "Trials queued or running of runs queued or running.", labels=["status"]
    )
    run_counts = dict.fromkeys((Run.Status.QUEUED, Run.Status.RUNNING), 0)
    live: list[int] = []
    for run_id, status in Run.objects.filter(status__in=list(run_counts)).values_list(
        "id", "status"
    ):
        run_counts[status] += 1
        live.append(run_id)
    for status, n in run_counts.items():
        runs.add_metric([status], n)
    by_status = {s.value: (0, None) for s in LIVE_STATUSES}
    if live:
        rows = (
            Trial.objects.filter(run_id__in=live, status__in=LIVE_STATUSES)
            .order_by()
            .values("status")
            .annotate(n=Count("id"), oldest=Min("created_at"))
        )
        by_status.update({row["status"]: (row["n"], row["oldest"]) for row in rows})
    for status, (n, _) in by_status.items():
        trials.add_metric([status], n)
    oldest = by_status[Trial.Status.QUEUED.value][1]
    yield runs
    yield trials
    yield GaugeMetricFamily(
        "assay_trial_oldest_queued_age_seconds",
        "Seconds since the oldest queued trial of a live run was created; 0 when none is queued.",
        value=0.0 if oldest is None else max(0.0, (now - oldest).total_seconds()),
    )
