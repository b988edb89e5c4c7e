"""Writes for injection probe runs: start one (a Celery task enqueued after commit) and
execute it (``judges.probes.probe_run``), storing the report on a ``ProbeRun`` row.

A probe run that cannot run (wrong judge kind, no endpoint, an unexpected exception) ends
``failed`` with the reason; it never leaves a report that reads as "not fooled".
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from judges import kinds
from judges.models import JudgeVersion, ProbeRun
from judges.probes import PROBES, probe_run
from judges.services import JudgeConfigError, Sleep

PROBE_KINDS = (kinds.RUBRIC, kinds.FAITHFULNESS)


def probes_supported(*, judge_version: JudgeVersion) -> bool:
    """Whether the probe set can run against ``judge_version``: a rubric or faithfulness
    judge with an endpoint (recorded-verdict versions have none)."""
    return bool(judge_version.base_url) and judge_version.judge.kind in PROBE_KINDS


def probe_run_start(*, judge_version: JudgeVersion, by=None) -> ProbeRun:
    """Queue a probe run of ``judge_version``; the task runs after commit. Raises
    ``JudgeConfigError`` naming the reason when the version cannot be probed."""
    from judges.tasks import probe_run_execute as task

    if not judge_version.base_url:
        raise JudgeConfigError(f"{judge_version}: recorded verdicts have no endpoint to probe")
    if judge_version.judge.kind not in PROBE_KINDS:
        raise JudgeConfigError(
            f"{judge_version}: probes need a rubric or faithfulness judge, "
            f"not {judge_version.judge.kind}"
        )
    with transaction.atomic():
        probe = ProbeRun.objects.create(judge_version=judge_version, started_by=by)
        transaction.on_commit(lambda: task.delay(probe.id))
    return probe


def probe_run_execute(*, probe_run_id: int, sleep: Sleep | None = None) -> ProbeRun:
    """Run the probes of a queued ``ProbeRun`` (one judge call per probe) and store the
    report. A finished probe run is left as it is (safe under redelivery)."""
    probe = ProbeRun.objects.select_related("judge_version__judge").get(id=probe_run_id)
    if probe.status in (ProbeRun.Status.SUCCEEDED, ProbeRun.Status.FAILED):
        return probe
    probe.status = ProbeRun.Status.RUNNING
    probe.save(update_fields=["status"])
    try:
        report = probe_run(judge_version=probe.judge_version, probes=PROBES, sleep=sleep)
    except Exception as exc:  # noqa: BLE001 - recorded loudly on the row, never swallowed
        probe.status, probe.error = ProbeRun.Status.FAILED, f"{type(exc).__name__}: {exc}"
    else:
        probe.status = ProbeRun.Status.SUCCEEDED
        probe.probes_total = len(report.results)
        probe.judged, probe.fooled, probe.errored = report.judged, report.fooled, report.errored
        probe.results = [
            {
                "name": r.name,
                "passed": r.passed,
                "correct": r.correct,
                "reason": r.reason,
                "reasoning": r.reasoning,
            }
            for r in report.results
        ]
    probe.finished_at = timezone.now()
    probe.save()
    return probe
