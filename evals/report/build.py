"""The run report's figures from flat arrays (no queries; reads: ``evals.report.selectors``).

A trial's outcome for one grader is a code (``evals.grading.verdict``); ``case_tally``
counts only PASS and FAIL as graded, errored grades dropped from both sides and counted (2
passes, 1 fail, 1 errored -> 2/3). Pass rate = mean of per-case rates, interval clustered by
case (``stats.intervals.clustered_rate_interval``). An errored grade is "not scored", an ok
grade without a score "no score"; score means skip both and count them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np

from core.strict_json import json_safe
from evals.grading.rungs import Spend, judge_rung
from evals.grading.verdict import (
    CANCELLED,
    PASS,
    PENDING,
    PIPELINE,
    CaseTally,
    case_tally,
    gating_keys,
    grader_codes,
    overall_codes,
)
from evals.report.cost_quality import CostQuality, cost_quality
from evals.report.costs import CostClasses
from evals.report.figures import (
    Figures,
    case_wilson,
    figures_for,
)
from evals.report.rows import RunRows
from evals.run_status import run_status_shown
from evals.trajectory.limits import limit_kind

OVERALL = "overall"


@dataclass(frozen=True)
class CaseCount:
    """One grader's k of n on one case, and its errored grades."""

    key: str
    passed: int
    graded: int
    errored: int


@dataclass(frozen=True)
class CaseRow:
    """One case: overall ``passed`` of ``graded`` trials with its Wilson 95% interval (rate
    None when nothing was graded), ``trials`` in the run, ``pipeline_errored`` trials,
    ``grades_errored`` trials whose gating grades errored, and per-grader counts."""

    case_uuid: str
    key: str
    tags: list[str]
    trials: int
    passed: int
    graded: int
    rate: float | None
    wilson_low: float
    wilson_high: float
    pipeline_errored: int
    grades_errored: int
    graders: list[CaseCount] = field(default_factory=list)


@dataclass(frozen=True)
class SliceReport:
    """The same figures over the cases carrying one tag."""

    tag: str
    n_cases: int
    overall: Figures
    graders: list[Figures]


@dataclass(frozen=True)
class ReasonGroup:
    """``count`` of ``of`` ``kind`` of ``grader`` sharing a ``reason`` (its first 500 chars)."""

    grader: str
    reason: str
    count: int
    of: int
    kind: str = "failures"

    @property
    def text(self) -> str:
        return f"{self.count} of {self.of} {self.kind}: {self.reason}"


@dataclass(frozen=True)
class TrialCounts:
    """``total`` = ``ok`` + ``errored`` + ``pending`` + ``cancelled`` trials; ``grade_errors`` on ok
    trials (``judge_errors`` from judges); ``overall_errored``: ok trials left out of the
    overall rate; ``retried``: replaced errored trials, in no other count."""

    total: int
    ok: int
    errored: int
    pending: int
    cancelled: int
    grade_errors: int
    judge_errors: int
    overall_errored: int
    retried: int = 0


@dataclass(frozen=True)
class Tokens:
    """Sums over finished trials with a known count; ``*_unknown``: those with a null count.
    The other token classes (``providers.usage``: cache_write, cache_read, reasoning) the same
    way, None when the rows did not load them (``runs_usage_totals`` does)."""

    input: int
    output: int
    input_unknown: int
    output_unknown: int
    cache_write: int | None = None
    cache_read: int | None = None
    reasoning: int | None = None
    cache_write_unknown: int | None = None
    cache_read_unknown: int | None = None
    reasoning_unknown: int | None = None

    @property
    def classes_shown(self) -> list[tuple[str, int, int]]:
        """``(label, sum, unknown)`` of each other class loaded, for the run page."""
        labels = (
            ("Cache write tokens", self.cache_write, self.cache_write_unknown),
            ("Cache read tokens", self.cache_read, self.cache_read_unknown),
            ("Reasoning tokens", self.reasoning, self.reasoning_unknown),
        )
        return [(label, n, u) for label, n, u in labels if n is not None and u is not None]


@dataclass(frozen=True)
class Latency:
    """Percentiles (ms, linear interpolation, numpy's default) over the ``n`` finished trials
    with a known latency; None when there are none; ``unknown``: finished trials without."""

    p50_ms: float | None
    p95_ms: float | None
    n: int
    unknown: int


@dataclass(frozen=True)
class Cost:
    """USD over finished trials: ``known_usd``; ``unknown`` null costs; ``total_usd`` only when all
    are known (else the known part is a lower bound); ``per_passing_trial_usd``: None when the
    total is unknown or nothing passed."""

    known_usd: Decimal
    unknown: int
    finished: int
    total_usd: Decimal | None
    per_passing_trial_usd: Decimal | None


@dataclass(frozen=True)
class RunReport:
    """Everything the run page, ``manage.py run_report`` and the API show about one run."""

    run_uuid: str
    run_name: str
    suite_name: str
    status: str
    is_simulated: bool
    trials_per_case: int
    n_cases: int
    trials: TrialCounts
    overall: Figures
    graders: list[Figures]
    cases: list[CaseRow]
    slices: list[SliceReport]
    failure_reasons: list[ReasonGroup]
    grade_error_reasons: list[ReasonGroup]
    pipeline_error_reasons: list[ReasonGroup]
    tokens: Tokens
    latency: Latency
    cost: Cost
    judge_calls: Spend | None = None  # the judge rung: every judge call paid for the run
    cost_quality: CostQuality | None = None
    # The token classes priced and why costs are unknown (``evals.report.costs``).
    cost_classes: CostClasses | None = None
    # A run with a contract grader: ``RunDecisions.as_json()`` (evals.grading.contract);
    # None otherwise.
    decisions: dict[str, Any] | None = None
    # A run with ``state`` and ``trajectory`` graders: ``AgentReport.as_json()``
    # (evals.report.agents: outcome, path, the 2 x 2, disagreements); None otherwise.
    agents: dict[str, Any] | None = None
    # The status the run shows (``evals.run_status``: an imported run is "imported", with
    # its errored trials and whether it is partial), as ``RunStatusShown.as_json()``.
    status_shown: dict[str, Any] | None = None
    # Errored trials stopped at a limit, by kind (``evals.trajectory.limits``: the tool
    # loop's caps and the limits importers read): ``[{"kind", "count"}]``, most first.
    limit_hits: list[dict[str, Any]] = field(default_factory=list)

    @property
    def errored_banner(self) -> str | None:
        """ "N of M trials errored" (M: finished trials, ok + errored; a cancelled or pending
        trial was not run: ``evals.run_status``), or None when no pipeline error."""
        if not self.trials.errored:
            return None
        return f"{self.trials.errored} of {self.trials.ok + self.trials.errored} trials errored"

    @property
    def incomplete_banner(self) -> str | None:
        """ "incomplete: N judge errors" / "incomplete: N grade errors (M from judges)"."""
        n, judges = self.trials.grade_errors, self.trials.judge_errors
        if not n:
            return None
        if judges == n:
            return f"incomplete: {n} judge error{'s' if n != 1 else ''}"
        suffix = f" ({judges} from judges)" if judges else ""
        return f"incomplete: {n} grade error{'s' if n != 1 else ''}{suffix}"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-safe data: Decimals as strings, no NaN or Infinity (as None)."""
        data = json_safe(dataclasses.asdict(self))
        data["banners"] = [b for b in (self.errored_banner, self.incomplete_banner) if b]
        return data


@dataclass(frozen=True)
class ReasonRows:
    """Grouped reasons, as fetched by ``selectors.run_report``: ``failure_groups`` and
    ``error_groups``: ``(grader, reason, count)`` over ok trials; ``pipeline_groups``:
    ``(error_message, count)``."""

    failure_groups: list[tuple]
    error_groups: list[tuple]
    pipeline_groups: list[tuple]


REASON_GROUPS_PER_GRADER = 10


def report_from_rows(
    *, run: Any, rows: RunRows, reasons: ReasonRows, cost_classes: CostClasses | None = None
) -> RunReport:
    """Assemble a ``RunReport`` from the fetched rows (numpy; no queries): index trials and cases,
    code arrays per grader, overall codes, per-case tallies, figures overall, per grader and per
    tag, case rows, reasons and usage. Long by design: every step shares the arrays of the first."""
    # 1. trials and cases
    n_cases = len(rows.cases)
    n_trials = len(rows.trials)
    columns = list(zip(*rows.trials, strict=True)) if rows.trials else [(), (), (), (), ()]
    trial_ids = np.array(columns[0], dtype=np.int64)
    order = np.argsort(trial_ids, kind="stable")
    trial_ids = trial_ids[order]
    case_by_id = {c[0]: i for i, c in enumerate(rows.cases)}
    case_idx = np.array([case_by_id[c] for c in columns[1]], dtype=np.int64)[order]
    status = np.array(columns[2], dtype=object)[order] if n_trials else np.array([], dtype=object)
    latency = np.array([np.nan if v is None else v for v in columns[3]], dtype=float)
    trial_codes = np.full(n_trials, PENDING)
    trial_codes[status == "ok"] = PASS
    trial_codes[status == "error"] = PIPELINE
    trial_codes[status == "cancelled"] = CANCELLED  # never run: neither pending nor graded

    # 2. one code array per grader (``grader_codes``)
    pairs = run.grader_set.gating_pairs
    keys = [k for k, _ in pairs]
    g_cols = list(zip(*rows.grades, strict=True)) if rows.grades else [()] * 6
    g_keys = np.array(g_cols[1], dtype=object)
    extra = sorted(set(g_cols[1]) - set(keys))
    keys += extra
    pos = np.searchsorted(trial_ids, np.array(g_cols[0], dtype=np.int64))
    g_code = np.array(g_cols[2], dtype=np.int64)
    g_score = np.array([np.nan if v is None else v for v in g_cols[3]], dtype=float)
    g_gating = np.array(g_cols[4], dtype=bool)
    g_judge = np.array([v is not None for v in g_cols[5]], dtype=bool)
    g_ok_trial = trial_codes[pos] == PASS if pos.size else np.array([], dtype=bool)
    codes, scores, seen = {}, {}, {}
    for key in keys:
        mine = g_keys == key
        codes[key] = grader_codes(
            trial_codes=trial_codes, trial_pos=pos[mine], grade_codes=g_code[mine]
        )
        mine &= g_ok_trial  # grades on errored or unfinished trials do not count
        seen[key] = bool(g_gating[mine].any())
        s, c = g_score[mine], case_idx[pos[mine]]
        finite = np.isfinite(s)
        errored = g_code[mine] == -1  # an errored grade: "not scored"; else a verdict alone
        scores[key] = (
            np.bincount(c[finite], weights=s[finite], minlength=n_cases),
            np.bincount(c[finite], minlength=n_cases),
            np.bincount(c[~finite & errored], minlength=n_cases),
            np.bincount(c[~finite & ~errored], minlength=n_cases),
        )
    errored_grades = (g_code == -1) & g_ok_trial
    grade_errors, judge_errors = int(errored_grades.sum()), int((errored_grades & g_judge).sum())

    # 3-4. overall (the verdict module's gating graders) and tallies
    gating = set(gating_keys(pairs, seen))
    overall = overall_codes([codes[k] for k in keys if k in gating], trial_codes)
    tallies = {k: case_tally(codes[k], case_idx, n_cases) for k in keys}
    overall_tally = case_tally(overall, case_idx, n_cases)
    k_max = max(int(run.trials_per_case or 1), int(overall_tally.graded.max(initial=0)))
    for t in tallies.values():
        k_max = max(k_max, int(t.graded.max(initial=0)))

    # 5. figures
    def figures(mask: np.ndarray) -> tuple[Figures, list[Figures]]:
        return (
            figures_for(OVERALL, None, overall_tally, mask, k_max),
            [figures_for(k, k in gating, tallies[k], mask, k_max, scores[k]) for k in keys],
        )

    overall_figures, grader_figures = figures(np.ones(n_cases, dtype=bool))
    grader_figures = _with_corrections(
        grader_figures, tallies, g_keys, g_cols[5], g_ok_trial, rows.approvals
    )
    by_tag: dict[str, list[int]] = {}
    for i, c in enumerate(rows.cases):
        for tag in c[3] or []:
            by_tag.setdefault(str(tag), []).append(i)
    slices = []
    for tag in sorted(by_tag):
        mask = np.zeros(n_cases, dtype=bool)
        mask[by_tag[tag]] = True
        o, g = figures(mask)
        slices.append(SliceReport(tag=tag, n_cases=int(mask.sum()), overall=o, graders=g))

    # 6. case rows, worst first (cases with nothing graded first of all)
    case_rows = _case_rows(rows.cases, case_idx, overall_tally, tallies)

    # 7. reasons, tokens, latency, cost
    fails = {f.key: f.trials_failed for f in grader_figures}
    errs = {f.key: f.grades_errored for f in grader_figures}
    n_pipeline = int((trial_codes == PIPELINE).sum())
    finished_latency = latency[order][(trial_codes == PASS) | (trial_codes == PIPELINE)]
    totals = rows.totals
    rate = overall_figures.pass_rate
    quality = cost_quality(
        finished=totals["finished"],
        cost_known_usd=totals["cost"],
        cost_unknown=totals["cost_unknown"],
        passed=overall_figures.trials_passed,
        pass_rate=rate.mean,
        pass_rate_low=rate.ci_low,
        pass_rate_high=rate.ci_high,
        unknown_why="" if cost_classes is None else cost_classes.why,
    )
    return RunReport(
        run_uuid=str(run.uuid),
        run_name=run.name,
        suite_name=run.suite.name,
        status=run.status,
        status_shown=run_status_shown(run).as_json(),
        is_simulated=bool(run.is_simulated),
        trials_per_case=int(run.trials_per_case),
        n_cases=n_cases,
        trials=TrialCounts(
            total=n_trials,
            ok=int((status == "ok").sum()),
            errored=n_pipeline,
            pending=int(np.isin(status, ["queued", "running"]).sum()),
            cancelled=int((status == "cancelled").sum()),
            grade_errors=grade_errors,
            judge_errors=judge_errors,
            overall_errored=overall_figures.grades_errored,
        ),
        overall=overall_figures,
        graders=grader_figures,
        cases=case_rows,
        slices=slices,
        failure_reasons=_groups(reasons.failure_groups, fails, "failures"),
        grade_error_reasons=_groups(reasons.error_groups, errs, "errors"),
        pipeline_error_reasons=[
            ReasonGroup("", msg or "(no message)", int(n), n_pipeline, "errors")
            for msg, n in sorted(reasons.pipeline_groups, key=lambda g: -g[1])[
                :REASON_GROUPS_PER_GRADER
            ]
        ],
        tokens=Tokens(
            input=int(totals["input_sum"] or 0),
            output=int(totals["output_sum"] or 0),
            input_unknown=totals["input_unknown"],
            output_unknown=totals["output_unknown"],
            **_class_totals(totals),
        ),
        latency=_latency(finished_latency),
        cost=_cost(quality),
        cost_quality=quality,
        cost_classes=cost_classes,
        limit_hits=_limit_hits(reasons.pipeline_groups),
    )


def _class_totals(totals: dict[str, Any]) -> dict[str, int | None]:
    """``Tokens``' other classes from ``totals`` (None for a class not loaded)."""
    out: dict[str, int | None] = {}
    for name in ("cache_write", "cache_read", "reasoning"):
        if f"{name}_unknown" in totals:
            out[name] = int(totals[f"{name}_sum"] or 0)
            out[f"{name}_unknown"] = int(totals[f"{name}_unknown"])
    return out


def _limit_hits(groups: list[tuple]) -> list[dict[str, Any]]:
    """``[{"kind", "count"}]`` of the errored trials whose message names a limit kind."""
    counts: dict[str, int] = {}
    for message, n in groups:
        kind = limit_kind(message or "")
        if kind is not None:
            counts[kind] = counts.get(kind, 0) + int(n)
    return [{"kind": k, "count": n} for k, n in sorted(counts.items(), key=lambda kv: -kv[1])]


def _case_rows(
    cases: list[tuple], case_idx: np.ndarray, overall: CaseTally, tallies: dict[str, CaseTally]
) -> list[CaseRow]:
    """One ``CaseRow`` per case, worst first: nothing graded first, then by rate and key."""
    n_cases = len(cases)
    per_case = np.bincount(case_idx, minlength=n_cases).tolist()
    t = overall
    o_cols = [a.tolist() for a in (t.passed, t.graded, t.pipeline_errors, t.grade_errors)]
    g_cols_case = {
        k: [a.tolist() for a in (v.passed, v.graded, v.grade_errors)] for k, v in tallies.items()
    }
    case_rows = []
    for i, (_, c_uuid, c_key, c_tags, _hash) in enumerate(cases):
        passed, graded = o_cols[0][i], o_cols[1][i]
        low, high = case_wilson(passed, graded)
        case_rows.append(
            CaseRow(
                case_uuid=str(c_uuid),
                key=c_key,
                tags=[str(x) for x in (c_tags or [])],
                trials=per_case[i],
                passed=passed,
                graded=graded,
                rate=passed / graded if graded else None,
                wilson_low=low,
                wilson_high=high,
                pipeline_errored=o_cols[2][i],
                grades_errored=o_cols[3][i],
                graders=[CaseCount(k, v[0][i], v[1][i], v[2][i]) for k, v in g_cols_case.items()],
            )
        )
    case_rows.sort(key=lambda r: (r.rate is not None, r.rate or 0.0, r.key))
    return case_rows


def _with_corrections(
    graders: list[Figures],
    tallies: dict[str, CaseTally],
    g_keys: np.ndarray,
    g_versions: tuple,
    g_ok_trial: np.ndarray,
    approvals: dict[int, tuple[int, dict | None]],
) -> list[Figures]:
    """Each grader's figures with ``corrected`` (Rogan–Gladen, by ``JudgeRung.corrected_pass_rate``)
    when all its grades come from one judge version: the correction needs one judge's error
    rates. None without a registered rung."""
    rung = judge_rung()
    if rung is None:
        return graders
    versions: dict[str, set] = {}
    for key, version, ok in zip(g_keys.tolist(), g_versions, g_ok_trial.tolist(), strict=True):
        if ok:
            versions.setdefault(key, set()).add(version)
    out = []
    for f in graders:
        found = versions.get(f.key, set())
        if len(found) != 1 or None in found:
            out.append(f)
            continue
        version = next(iter(found))
        approval_id, approval_figures = approvals.get(version, (None, None))
        out.append(
            dataclasses.replace(
                f,
                corrected=rung.corrected_pass_rate(
                    judge_version_id=int(version),
                    approval_id=approval_id,
                    approval_figures=approval_figures,
                    passed=tallies[f.key].passed,
                    graded=tallies[f.key].graded,
                ),
            )
        )
    return out


def _groups(groups: list[tuple], totals: dict[str, int], kind: str) -> list[ReasonGroup]:
    out: dict[str, list[ReasonGroup]] = {}
    for grader, reason, n in sorted(groups, key=lambda g: (g[0], -g[2], g[1])):
        bucket = out.setdefault(grader, [])
        if len(bucket) < REASON_GROUPS_PER_GRADER:
            bucket.append(ReasonGroup(grader, reason, int(n), totals.get(grader, int(n)), kind))
    return [g for key in totals if key in out for g in out[key]]


def _latency(values: np.ndarray) -> Latency:
    known = values[np.isfinite(values)]
    unknown = int(values.size - known.size)
    if not known.size:
        return Latency(None, None, 0, unknown)
    p50, p95 = np.percentile(known, [50, 95])
    return Latency(float(p50), float(p95), int(known.size), unknown)


def _cost(quality: CostQuality) -> Cost:
    """The report's cost block from ``quality`` (``evals.report.cost_quality``)."""
    return Cost(
        known_usd=quality.cost_known_usd,
        unknown=quality.cost_unknown,
        finished=quality.finished,
        total_usd=quality.cost_usd,
        per_passing_trial_usd=quality.cost_per_passing_trial_usd,
    )


@dataclass(frozen=True)
class OverallCodes:
    """Each trial's overall verdict code for a run read by the run loader: ``trial_ids``
    (sorted), ``case_idx`` (index into ``RunRows.cases``), ``codes`` (``evals.grading.verdict``
    codes, the report's overall rule) and the per-case ``tally``."""

    trial_ids: np.ndarray
    case_idx: np.ndarray
    codes: np.ndarray
    tally: CaseTally


STATUS_CODES = {"ok": PASS, "error": PIPELINE, "cancelled": CANCELLED}


def overall_codes_from_rows(*, run: Any, rows: RunRows) -> OverallCodes:
    """``report_from_rows``'s overall verdicts alone, for readers of many runs (a case's history);
    tests hold it equal to the report's case rows and the grid's cells. No queries."""
    n_cases, n_trials, n_grades = len(rows.cases), len(rows.trials), len(rows.grades)
    case_by_id = {c[0]: i for i, c in enumerate(rows.cases)}
    trial_ids = np.fromiter((t[0] for t in rows.trials), np.int64, n_trials)
    order = np.argsort(trial_ids, kind="stable")
    trial_ids = trial_ids[order]
    case_idx = np.fromiter((case_by_id[t[1]] for t in rows.trials), np.int64, n_trials)[order]
    trial_codes = np.fromiter(
        (STATUS_CODES.get(t[2], PENDING) for t in rows.trials), np.int64, n_trials
    )[order]
    pairs = run.grader_set.gating_pairs
    key_pos = {k: i for i, (k, _) in enumerate(pairs)}
    g_key = np.fromiter(
        (key_pos.setdefault(g[1], len(key_pos)) for g in rows.grades), np.int64, n_grades
    )
    pos = np.searchsorted(trial_ids, np.fromiter((g[0] for g in rows.grades), np.int64, n_grades))
    g_code = np.fromiter((g[2] for g in rows.grades), np.int64, n_grades)
    g_gating = np.fromiter((bool(g[4]) for g in rows.grades), bool, n_grades)
    g_ok_trial = trial_codes[pos] == PASS if n_grades else np.array([], dtype=bool)
    # A grader outside the grader set gates when its grades say so (as the report).
    seen = {k: bool(g_gating[(g_key == i) & g_ok_trial].any()) for k, i in key_pos.items()}
    gating_codes = []
    for key in gating_keys(pairs, seen):
        mine = g_key == key_pos[key]
        gating_codes.append(
            grader_codes(trial_codes=trial_codes, trial_pos=pos[mine], grade_codes=g_code[mine])
        )
    overall = overall_codes(gating_codes, trial_codes)
    return OverallCodes(trial_ids, case_idx, overall, case_tally(overall, case_idx, n_cases))
