"""A case's history: its pass rate in every run of its suite, newest first, trials one click
away (``case_history_get``). The grid's rules (``evals.grid.build``): the run report's
verdicts, Wilson 95% intervals, flaky when 0 < passed < graded; when the case is blind for
the viewer no run shows counts or verdicts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from evals.baselines import baseline_current
from evals.blindness import blind_for
from evals.grading.verdict import ERRORED, FAIL, PASS, PIPELINE
from evals.models import Case, Run, Trial
from evals.report.build import overall_codes_from_rows
from evals.report.figures import case_wilson
from evals.report.rows import runs_rows_get
from evals.run_status import RunStatusShown, run_status_shown

VERDICTS = {PASS: "pass", FAIL: "fail", ERRORED: "errored grade", PIPELINE: "pipeline error"}


@dataclass(frozen=True)
class HistoryTrial:
    """One trial: ``uuid``, ``attempt``, ``status`` and overall ``verdict`` ("" when hidden)."""

    uuid: str
    attempt: int
    status: str
    verdict: str


@dataclass(frozen=True)
class HistoryRun:
    """The case in one run: ``passed`` of ``graded`` with a Wilson 95% interval, ``flaky``,
    ``hidden`` (blind for the viewer) and ``trials``."""

    run_uuid: str
    run_name: str
    created_at: datetime
    status: str
    is_baseline: bool
    passed: int
    graded: int
    rate: float | None
    low: float | None
    high: float | None
    flaky: bool
    hidden: bool
    trials: list[HistoryTrial]
    status_shown: RunStatusShown | None = None  # what its badge says (evals.run_status)


@dataclass(frozen=True)
class CaseHistory:
    """``case`` in every run that ran it, newest first, with ``flaky_runs``, ``graded_runs``."""

    case: Case
    runs: list[HistoryRun]

    @property
    def flaky_runs(self) -> int:
        return sum(r.flaky for r in self.runs)

    @property
    def graded_runs(self) -> int:
        return sum(r.rate is not None for r in self.runs)


def case_history_get(*, case: Case, viewer) -> CaseHistory:
    """The history of ``case``: a fixed number of queries whatever the number of runs and trials."""
    runs = list(
        Run.objects.filter(suite_id=case.suite_id, trials__case=case)
        .distinct()
        .order_by("-created_at", "-id")
    )
    baseline = baseline_current(suite=case.suite)
    hidden = blind_for(viewer).holds(case)
    rows_by_run = runs_rows_get(runs=runs, case_ids=[case.id], usage=False) if runs else {}
    trial_meta = {
        t[0]: t[1:]
        for t in Trial.objects.filter(case=case, run__in=runs, replaced_by__isnull=True)
        .order_by()
        .values_list("id", "uuid", "attempt", "status")
    }
    out = []
    for run in runs:
        oc = overall_codes_from_rows(run=run, rows=rows_by_run[run.id])
        ids = oc.trial_ids.tolist()
        passed = int(oc.tally.passed.sum()) if not hidden else 0
        graded = int(oc.tally.graded.sum()) if not hidden else 0
        low, high = case_wilson(passed, graded) if graded else (None, None)
        trials = []
        for trial_id, code in zip(ids, oc.codes.tolist(), strict=True):
            uuid, attempt, status = trial_meta[trial_id]
            verdict = "" if hidden else VERDICTS.get(code, "")
            trials.append(HistoryTrial(str(uuid), attempt, status, verdict))
        trials.sort(key=lambda t: t.attempt)
        out.append(
            HistoryRun(
                run_uuid=str(run.uuid),
                run_name=run.name,
                created_at=run.created_at,
                status=run.status,
                status_shown=run_status_shown(run),
                is_baseline=baseline is not None and baseline.run_id == run.id,
                passed=passed,
                graded=graded,
                rate=passed / graded if graded else None,
                low=low,
                high=high,
                flaky=0 < passed < graded,
                hidden=hidden,
                trials=trials,
            )
        )
    return CaseHistory(case=case, runs=out)
