"""Reads for the suite page: its cases, its runs' pass rates over time, its baseline history
and the capability cases ready to graduate into a regression suite.

Query shapes are fixed: a handful of queries per page whatever the number of cases, runs or
trials (one grouped aggregate per distinct gating grader set among the runs shown).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.errors import DomainError
from evals.baselines import HISTORY_RUNS, baseline_current
from evals.grading.grader_config import parse_grader_specs
from evals.grading.grader_set import IMPORTED_KIND, recorded_kind_reason
from evals.models import Baseline, Case, Graduation, Run, Suite
from evals.prune import runs_pruned_count
from evals.selectors import _run_case_counts
from stats.intervals import ClusteredMean, clustered_rate_interval

GRADUATION_WINDOW = 3  # a capability case must pass every trial of this many latest runs
CASE_LIST_LIMIT = 500


@dataclass(frozen=True)
class RunPoint:
    """One run on the suite chart: ``pass_rate`` (mean of per-case rates, clustered 95% interval),
    ``graded``/``passed``, ``errored`` and ``grade_errored`` trials (out of the rate)."""

    run: Run
    pass_rate: ClusteredMean
    passed: int
    graded: int
    errored: int
    grade_errored: int


@dataclass(frozen=True)
class GraduationCandidate:
    """A capability case that passed every trial of each of the last runs: ``evidence`` is
    ``[{"run": uuid str, "run_name": str, "passed": int, "trials": int}, ...]``, newest first;
    ``graduated_into`` lists the regression suites it was already copied into."""

    case: Case
    evidence: list[dict]
    graduated_into: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SuitePage:
    """Everything the suite page shows; ``runs`` oldest first (the chart's order)."""

    suite: Suite
    active_cases: list[Case]
    n_active: int
    n_retired: int
    runs: list[RunPoint]
    baselines: list[Baseline]
    candidates: list[GraduationCandidate]
    regression_suites: list[Suite]
    window: int = GRADUATION_WINDOW
    cases_page: int = 1  # the page of ``CASE_LIST_LIMIT`` active cases shown (1-based)
    runs_pruned: int = 0  # runs deleted by ``runs_prune`` (evals.prune)

    @property
    def cases_pages(self) -> int:
        """How many pages of ``CASE_LIST_LIMIT`` active cases there are (at least 1)."""
        return max(1, -(-self.n_active // CASE_LIST_LIMIT))

    @property
    def cases_first(self) -> int:
        """The 1-based position of the first active case shown (0 when there is none)."""
        return (self.cases_page - 1) * CASE_LIST_LIMIT + 1 if self.active_cases else 0

    @property
    def cases_last(self) -> int:
        """The 1-based position of the last active case shown (0 when there is none)."""
        return (self.cases_page - 1) * CASE_LIST_LIMIT + len(self.active_cases)

    @property
    def baseline(self) -> Baseline | None:
        """The current baseline: the latest row of the history, or None."""
        return self.baselines[0] if self.baselines else None


def suite_page_get(
    *, suite: Suite, history_runs: int = HISTORY_RUNS, cases_page: int = 1
) -> SuitePage:
    """The suite page's data: active cases (page ``cases_page`` of ``CASE_LIST_LIMIT``; past the
    last shows the last) and counts, the latest ``history_runs`` runs oldest first, the baseline
    history, graduation candidates and the suites a case may graduate into."""
    cases = Case.objects.filter(suite=suite)
    n_active = cases.filter(retired_at__isnull=True).count()
    n_retired = cases.filter(retired_at__isnull=False).count()
    cases_page = min(max(1, cases_page), max(1, -(-n_active // CASE_LIST_LIMIT)))
    first = (cases_page - 1) * CASE_LIST_LIMIT
    active = list(
        cases.filter(retired_at__isnull=True).order_by("key")[first : first + CASE_LIST_LIMIT]
    )
    runs = list(
        Run.objects.filter(suite=suite)
        .select_related("started_by")
        .order_by("-created_at", "-id")[:history_runs]
    )
    per_case = run_case_counts(runs=runs)
    points = [_point(run, per_case.get(run.id, [])) for run in reversed(runs)]
    baselines = list(
        Baseline.objects.filter(suite=suite)
        .select_related("run", "set_by")
        .order_by("-set_at", "-id")
    )
    candidates: list[GraduationCandidate] = []
    regression_suites: list[Suite] = []
    if suite.kind == Suite.Kind.CAPABILITY:
        candidates = graduation_candidates(suite=suite, runs=runs, per_case=per_case)
        regression_suites = list(Suite.objects.filter(kind=Suite.Kind.REGRESSION).order_by("name"))
    return SuitePage(
        suite=suite,
        active_cases=active,
        n_active=n_active,
        n_retired=n_retired,
        runs=points,
        baselines=baselines,
        candidates=candidates,
        regression_suites=regression_suites,
        cases_page=cases_page,
        runs_pruned=runs_pruned_count(suite=suite),
    )


def run_case_counts(*, runs: list[Run]) -> dict[int, list[dict]]:
    """Per-run lists of per-case trial counts; one query per distinct gating grader set."""
    by_keys: dict[tuple[str, ...], list[int]] = {}
    for run in runs:
        by_keys.setdefault(run.grader_set.gating_keys, []).append(run.id)
    out: dict[int, list[dict]] = {}
    for keys, run_ids in by_keys.items():
        for row in _run_case_counts(run_ids=run_ids, keys=keys):
            out.setdefault(row["run_id"], []).append(row)
    return out


def _point(run: Run, rows: list[dict]) -> RunPoint:
    graded = [(r["n_pass"], r["n_pass"] + r["n_fail"]) for r in rows]
    counts = np.array([(p, g) for p, g in graded if g], dtype=np.int64).reshape(-1, 2)
    return RunPoint(
        run=run,
        pass_rate=clustered_rate_interval(counts[:, 0], counts[:, 1]),
        passed=sum(p for p, _ in graded),
        graded=sum(g for _, g in graded),
        errored=sum(r["n_err"] for r in rows),
        grade_errored=sum(r["n_grade_err"] for r in rows),
    )


def graduation_candidates(
    *,
    suite: Suite,
    runs: list[Run] | None = None,
    per_case: dict[int, list[dict]] | None = None,
    window: int = GRADUATION_WINDOW,
) -> list[GraduationCandidate]:
    """Active cases of ``suite`` that passed every trial of each of its latest ``window`` finished
    runs (an errored trial or grade, or absence from a run, disqualifies); empty with fewer runs.
    ``runs`` (newest first) and ``per_case`` reuse queries already made."""
    if runs is None:
        runs = list(Run.objects.filter(suite=suite).order_by("-created_at", "-id")[:HISTORY_RUNS])
    latest = [r for r in runs if r.is_terminal][:window]
    if len(latest) < window:
        return []
    if per_case is None:
        per_case = run_case_counts(runs=latest)
    qualified: dict[int, list[dict]] | None = None
    for run in latest:
        good = {
            r["case_id"]: {
                "run": str(run.uuid),
                "run_name": run.name,
                "passed": r["n_pass"],
                "trials": r["n_total"],
            }
            for r in per_case.get(run.id, [])
            if r["n_total"] > 0 and r["n_pass"] == r["n_total"]
        }
        if qualified is None:
            qualified = {cid: [ev] for cid, ev in good.items()}
        else:
            qualified = {cid: [*evs, good[cid]] for cid, evs in qualified.items() if cid in good}
    if not qualified:
        return []
    cases = Case.objects.filter(id__in=qualified, retired_at__isnull=True).order_by("key")
    done: dict[int, list[str]] = {}
    for case_id, name in Graduation.objects.filter(case_id__in=qualified).values_list(
        "case_id", "regression_case__suite__name"
    ):
        done.setdefault(case_id, []).append(name)
    return [
        GraduationCandidate(
            case=c, evidence=qualified[c.id], graduated_into=sorted(done.get(c.id, []))
        )
        for c in cases
    ]


def power_sentence(power) -> str:
    """A ``DetectableDrop`` in words ("a drop of about 12 points with 80% power"), or why not."""
    size = f"alpha {power.alpha:g}; {power.n_cases} cases × {power.trials_per_case} trials"
    if power.drop is None:
        return (
            f"this suite cannot reliably detect any drop: {power.reason} ({size}); "
            "add cases or trials"
        )
    return (
        f"this suite can detect a drop of about {power.drop * 100:.0f} points with "
        f"{power.target_power:.0%} power ({size})"
    )


@dataclass(frozen=True)
class GraderLeftOut:
    """A grader of the source run a new run could not use: ``key``, ``kind`` and ``reason``."""

    key: str
    kind: str
    reason: str


@dataclass(frozen=True)
class GraderPrefill:
    """The grader set offered for a new run: ``graders`` (each accepted by ``parse_grader_specs``),
    ``left_out`` (with why) and ``source`` (None: nothing to offer)."""

    graders: list[dict]
    left_out: list[GraderLeftOut] = field(default_factory=list)
    source: Run | None = None


def grader_runnable_problem(item: object) -> str | None:
    """Why a new run cannot use the stored grader ``item``, or None: ``parse_grader_specs``'s rule
    (a recorded grader cannot run; no kind reads as ``imported``). One query for a judge grader."""
    if not isinstance(item, dict):
        return recorded_kind_reason(IMPORTED_KIND)
    if not item.get("kind"):
        item = {**item, "kind": IMPORTED_KIND}
    try:
        parse_grader_specs([item])
    except DomainError as exc:
        return exc.message
    return None


def suite_default_graders(*, suite: Suite) -> GraderPrefill:
    """The grader set to prefill for a new run of ``suite``: the baseline's, else the latest
    succeeded run's (never a failed run's: it may be what broke it), runnable ones only, the
    rest in ``left_out``. Two queries, plus one per judge grader."""
    baseline = baseline_current(suite=suite)
    source: Run | None
    if baseline is not None and baseline.run.graders:
        source = baseline.run
    else:
        source = (
            Run.objects.filter(suite=suite, status=Run.Status.SUCCEEDED)
            .exclude(graders=[])
            .order_by("-created_at", "-id")
            .only("uuid", "name", "graders", "source")
            .first()
        )
    if source is None:
        return GraderPrefill(graders=[])
    graders, left_out = [], []
    for item in source.graders if isinstance(source.graders, list) else []:
        problem = grader_runnable_problem(item)
        if problem is None:
            graders.append(item)
        else:
            key = item.get("key") if isinstance(item, dict) else None
            kind = item.get("kind") if isinstance(item, dict) else None
            left_out.append(GraderLeftOut(str(key or "?"), str(kind or IMPORTED_KIND), problem))
    return GraderPrefill(graders=graders, left_out=left_out, source=source)
