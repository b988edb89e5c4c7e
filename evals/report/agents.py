"""The run report's agent block (docs/agents.md, "Grading agents"): outcome against path.

``state`` graders are the outcome, ``trajectory`` graders the path, each side's verdict the
three-valued AND of its grades (``overall_codes``); a run without both has no block. A
trial with a side errored or missing is out of the 2 × 2 (``left_out``); a grader whose
every grade errored is left out of its side when another judged. Overall cells are means of
per-case shares with 95% intervals clustered by case; disagreements are grouped by the
failing side's ``details.group``. ``agent_report`` reads no query, ``agent_reasons_add``
one; trajectories are never read."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Substr

from evals.grading.grader_set import STATE_KIND, TRAJECTORY_KIND
from evals.grading.verdict import (
    FAIL,
    PASS,
    PENDING,
    PIPELINE,
    case_tally,
    grader_codes,
    overall_codes,
)
from evals.models import Grade, Run, Trial
from evals.report.figures import Figures, case_wilson, figures_for
from evals.report.rows import RunRows, run_rows_get
from stats.intervals import clustered_rate_interval

RIGHT_OUTCOME_WRONG_PATH = "right_outcome_wrong_path"
WRONG_OUTCOME_EXPECTED_PATH = "wrong_outcome_expected_path"
DISAGREEMENT_KINDS = (RIGHT_OUTCOME_WRONG_PATH, WRONG_OUTCOME_EXPECTED_PATH)
TRIALS_LISTED_PER_GROUP = 20
GROUPS_LISTED = 20
REASON_CHARS = 500
_STATUS = {"ok": PASS, "error": PIPELINE}


@dataclass(frozen=True)
class Cell:
    """One cell of the overall 2 × 2: ``trials`` in it, its ``share`` (mean of per-case shares) and
    the clustered 95% interval (``low``, ``high``; None when the table is empty)."""

    trials: int
    share: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class CaseAgreement:
    """One case's 2 × 2 counts; ``left_out``: ok trials with a side errored or missing; the three
    rates with Wilson 95% intervals (``[low, high]``, None without a trial in the table);
    ``errored``: trials that errored where they ran."""

    case_uuid: str
    key: str
    both_pass: int
    outcome_only: int
    path_only: int
    both_fail: int
    left_out: int
    outcome_rate: float | None
    outcome_interval: tuple[float, float]
    path_rate: float | None
    path_interval: tuple[float, float]
    disagreement_rate: float | None
    disagreement_interval: tuple[float, float]
    errored: int = 0

    @property
    def disagreements(self) -> int:
        return self.outcome_only + self.path_only


@dataclass(frozen=True)
class DisagreementTrial:
    """A trial listed under a disagreement group."""

    trial_uuid: str
    case_key: str
    attempt: int
    reason: str


@dataclass(frozen=True)
class DisagreementGroup:
    """``count`` trials of ``kind`` sharing ``label``: a few in ``trials``, all in ``trial_ids``."""

    kind: str
    label: str
    count: int
    trials: list[DisagreementTrial] = field(default_factory=list)
    trial_ids: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class AgentReport:
    """The agent block of a run report: grader keys and figures per side, the overall 2 × 2 cells,
    ``in_table``/``left_out``/``errored_trials`` counts, ``cases`` (worst disagreement first),
    ``groups`` (filled by ``agent_reasons_add``), and ``disagreement_ids`` by kind (not in the
    JSON)."""

    outcome_keys: list[str]
    path_keys: list[str]
    path_gating: bool
    outcome: Figures
    path: Figures
    both_pass: Cell
    outcome_only: Cell
    path_only: Cell
    both_fail: Cell
    in_table: int
    left_out: int
    cases: list[CaseAgreement]
    errored_trials: int = 0
    groups: list[DisagreementGroup] = field(default_factory=list)
    disagreement_ids: dict[str, list[int]] = field(default_factory=dict)
    # Graders of either side set aside: every grade errored, another of the side judged.
    set_aside_keys: list[str] = field(default_factory=list)

    @property
    def disagreements(self) -> int:
        return self.outcome_only.trials + self.path_only.trials

    def as_json(self) -> dict[str, Any]:
        """JSON-safe data for ``run_report --json`` and the API (no trial ids)."""
        data = asdict(self)
        data.pop("disagreement_ids")
        for group in data["groups"]:
            group.pop("trial_ids")
        data["disagreements"] = self.disagreements
        for row, case in zip(data["cases"], self.cases, strict=True):
            row["disagreements"] = case.disagreements
        return data


def agent_keys(run: Run) -> tuple[list[str], list[str]]:
    """(outcome keys, path keys): the run's ``state`` and ``trajectory`` graders."""
    specs = run.grader_set.specs
    return (
        [s.key for s in specs if s.kind == STATE_KIND],
        [s.key for s in specs if s.kind == TRAJECTORY_KIND],
    )


def _side_codes(
    keys: list[str], grades: list[tuple], trial_ids: np.ndarray, trial_codes: np.ndarray
) -> np.ndarray:
    """Per trial, the verdict rule over ``keys``' grades (``grader_codes``, ``overall_codes``)."""
    per_key = []
    for key in keys:
        mine = [g for g in grades if g[1] == key]
        pos = np.searchsorted(trial_ids, np.fromiter((g[0] for g in mine), np.int64, len(mine)))
        values = np.fromiter((g[2] for g in mine), np.int64, len(mine))
        per_key.append(grader_codes(trial_codes=trial_codes, trial_pos=pos, grade_codes=values))
    return overall_codes(per_key, trial_codes)


def _cell(in_cell: np.ndarray, in_table: np.ndarray, case_idx: np.ndarray, n_cases: int) -> Cell:
    hits = np.bincount(case_idx[in_cell], minlength=n_cases)
    n = np.bincount(case_idx[in_table], minlength=n_cases)
    has = n > 0
    if not has.any():
        return Cell(int(in_cell.sum()), None, None, None)
    rate = clustered_rate_interval(hits[has], n[has])
    return Cell(int(in_cell.sum()), rate.mean, rate.ci_low, rate.ci_high)


def _rate(k: int, n: int) -> tuple[float | None, tuple[float, float]]:
    if not n:
        return None, (0.0, 1.0)
    return k / n, case_wilson(k, n)


@dataclass(frozen=True)
class AgentCodes:
    """Per trial of a run (sorted ``trial_ids``): ``case_idx`` (into ``RunRows.cases``),
    ``trial_codes`` and the verdict codes of each side, ``outcome`` and ``path``."""

    outcome_keys: list[str]
    path_keys: list[str]
    trial_ids: np.ndarray
    case_idx: np.ndarray
    trial_codes: np.ndarray
    outcome: np.ndarray
    path: np.ndarray
    set_aside: tuple[str, ...] = ()


def _superseded_out(keys: list[str], judged: set[str]) -> list[str]:
    """``keys`` without those whose every grade errored, when another key of the side judged."""
    if not any(k in judged for k in keys):
        return keys
    return [k for k in keys if k in judged]


def agent_codes(*, run: Run, rows: RunRows) -> AgentCodes | None:
    """Each trial's outcome and path codes (no query); None without both agent kinds."""
    outcome_keys, path_keys = agent_keys(run)
    if not outcome_keys or not path_keys:
        return None
    n_trials = len(rows.trials)
    case_by_id = {c[0]: i for i, c in enumerate(rows.cases)}
    trial_ids = np.fromiter((t[0] for t in rows.trials), np.int64, n_trials)
    order = np.argsort(trial_ids, kind="stable")
    trial_ids = trial_ids[order]
    case_idx = np.fromiter((case_by_id[t[1]] for t in rows.trials), np.int64, n_trials)[order]
    trial_codes = np.fromiter(
        (_STATUS.get(t[2], PENDING) for t in rows.trials), np.int64, n_trials
    )[order]
    wanted = set(outcome_keys) | set(path_keys)
    grades = [g for g in rows.grades if g[1] in wanted]
    judged = {g[1] for g in grades if g[2] != -1}
    all_keys = [*outcome_keys, *path_keys]
    outcome_keys = _superseded_out(outcome_keys, judged)
    path_keys = _superseded_out(path_keys, judged)
    kept = {*outcome_keys, *path_keys}
    return AgentCodes(
        outcome_keys,
        path_keys,
        trial_ids,
        case_idx,
        trial_codes,
        _side_codes(outcome_keys, grades, trial_ids, trial_codes),
        _side_codes(path_keys, grades, trial_ids, trial_codes),
        tuple(k for k in all_keys if k not in kept),
    )


def agent_report(*, run: Run, rows: RunRows, k_max: int) -> AgentReport | None:
    """The agent block from the run loader's rows (no query), without groups; None unless the run
    has both agent kinds. ``k_max``: the largest k of pass@k and pass^k."""
    codes = agent_codes(run=run, rows=rows)
    if codes is None:
        return None
    outcome_keys, path_keys = codes.outcome_keys, codes.path_keys
    trial_ids, case_idx, trial_codes = codes.trial_ids, codes.case_idx, codes.trial_codes
    outcome, path = codes.outcome, codes.path
    n_cases = len(rows.cases)
    mask = np.ones(n_cases, dtype=bool)
    outcome_figures = figures_for(
        "outcome", True, case_tally(outcome, case_idx, n_cases), mask, k_max
    )
    path_gating = any(s.gating for s in run.grader_set.specs if s.key in path_keys)
    path_figures = figures_for(
        "trajectory", path_gating, case_tally(path, case_idx, n_cases), mask, k_max
    )

    graded = lambda codes: (codes == PASS) | (codes == FAIL)  # noqa: E731
    in_table = graded(outcome) & graded(path)
    ok = trial_codes == PASS
    cells = {
        "both_pass": in_table & (outcome == PASS) & (path == PASS),
        "outcome_only": in_table & (outcome == PASS) & (path == FAIL),
        "path_only": in_table & (outcome == FAIL) & (path == PASS),
        "both_fail": in_table & (outcome == FAIL) & (path == FAIL),
    }
    counts = {
        name: np.bincount(case_idx[m], minlength=n_cases).tolist() for name, m in cells.items()
    }
    out_count = np.bincount(case_idx[ok & ~in_table], minlength=n_cases).tolist()
    errored = trial_codes == PIPELINE
    errored_count = np.bincount(case_idx[errored], minlength=n_cases).tolist()
    cases = []
    for i, (_, c_uuid, c_key, _tags, _hash) in enumerate(rows.cases):
        bp, oo, po, bf = (counts[n][i] for n in cells)
        n = bp + oo + po + bf
        o_rate, o_ci = _rate(bp + oo, n)
        p_rate, p_ci = _rate(bp + po, n)
        d_rate, d_ci = _rate(oo + po, n)
        cases.append(
            CaseAgreement(
                str(c_uuid), c_key, bp, oo, po, bf, out_count[i],
                o_rate, o_ci, p_rate, p_ci, d_rate, d_ci, errored_count[i],
            )
        )  # fmt: skip
    cases.sort(key=lambda c: (-(c.disagreement_rate or 0.0), -c.disagreements, c.key))
    return AgentReport(
        outcome_keys=outcome_keys,
        path_keys=path_keys,
        path_gating=path_gating,
        outcome=outcome_figures,
        path=path_figures,
        in_table=int(in_table.sum()),
        left_out=int((ok & ~in_table).sum()),
        errored_trials=int(errored.sum()),
        cases=cases,
        set_aside_keys=list(codes.set_aside),
        disagreement_ids={
            RIGHT_OUTCOME_WRONG_PATH: trial_ids[cells["outcome_only"]].tolist(),
            WRONG_OUTCOME_EXPECTED_PATH: trial_ids[cells["path_only"]].tolist(),
        },
        both_pass=_cell(cells["both_pass"], in_table, case_idx, n_cases),
        outcome_only=_cell(cells["outcome_only"], in_table, case_idx, n_cases),
        path_only=_cell(cells["path_only"], in_table, case_idx, n_cases),
        both_fail=_cell(cells["both_fail"], in_table, case_idx, n_cases),
    )


def _label(kind: str, groups: list[str]) -> str:
    text = "; ".join(groups) if groups else "(no reason given)"
    if kind == RIGHT_OUTCOME_WRONG_PATH:
        return f"right outcome via {text}"
    return f"outcome fail on the expected path: {text}"


def agent_reasons_add(*, run: Run, report: AgentReport) -> AgentReport:
    """``report`` with its disagreement ``groups`` (``GROUPS_LISTED`` per kind). One query."""
    kind_of = {tid: kind for kind, ids in report.disagreement_ids.items() for tid in ids}
    if not kind_of:
        return report
    side = {RIGHT_OUTCOME_WRONG_PATH: set(report.path_keys)}
    side[WRONG_OUTCOME_EXPECTED_PATH] = set(report.outcome_keys)
    rows = (
        Grade.objects.filter(
            trial__run_id=run.id,
            trial__status=Trial.Status.OK,
            grader__in=[*report.outcome_keys, *report.path_keys],
            status=Grade.Status.OK,
            passed=False,
        )
        .order_by("trial__case__key", "trial__attempt", "grader")
        .values_list(
            "trial_id",
            "grader",
            KeyTextTransform("group", "details"),
            Substr("reason", 1, REASON_CHARS),
            "trial__uuid",
            "trial__attempt",
            "trial__case__key",
        )
    )
    per_trial: dict[int, dict[str, Any]] = {}
    for tid, grader, group, reason, t_uuid, attempt, case_key in rows:
        kind = kind_of.get(tid)
        if kind is None or grader not in side[kind]:
            continue
        entry = per_trial.setdefault(
            tid, {"groups": [], "reasons": [], "trial": (str(t_uuid), case_key, attempt)}
        )
        entry["groups"].append(group or reason)
        entry["reasons"].append(reason)
    buckets: dict[tuple[str, str], list[tuple[int, DisagreementTrial]]] = {}
    for tid, kind in kind_of.items():
        entry = per_trial.get(tid, {"groups": [], "reasons": [], "trial": None})
        if entry["trial"] is None:
            continue  # a failing grade replaced since the figures were read
        t_uuid, case_key, attempt = entry["trial"]
        label = _label(kind, entry["groups"])
        buckets.setdefault((kind, label), []).append(
            (tid, DisagreementTrial(t_uuid, case_key, attempt, "; ".join(entry["reasons"])))
        )
    groups: list[DisagreementGroup] = []
    for kind in DISAGREEMENT_KINDS:
        mine = sorted(
            ((label, trials) for (k, label), trials in buckets.items() if k == kind),
            key=lambda item: (-len(item[1]), item[0]),
        )
        for label, trials in mine[:GROUPS_LISTED]:
            trials.sort(key=lambda t: (t[1].case_key, t[1].attempt))
            listed = [t for _, t in trials[:TRIALS_LISTED_PER_GROUP]]
            groups.append(
                DisagreementGroup(kind, label, len(trials), listed, [tid for tid, _ in trials])
            )
    return AgentReport(**{**report.__dict__, "groups": groups})


def run_disagreements(*, run: Run) -> AgentReport | None:
    """The agent block of ``run`` with its groups (None without both kinds): the review queue's."""
    rows = run_rows_get(run=run)
    k_max = max(int(run.trials_per_case or 1), 1)
    report = agent_report(run=run, rows=rows, k_max=k_max)
    return None if report is None else agent_reasons_add(run=run, report=report)


def disagreement_trial_ids(report: AgentReport, *, kind: str = "", label: str = "") -> list[int]:
    """Trial ids of ``report``'s disagreements: all of them, those of one ``kind``, or those
    of one group (``kind`` and ``label``, as ``agent_reasons_add`` grouped them)."""
    if label:
        return [
            tid for g in report.groups if g.kind == kind and g.label == label for tid in g.trial_ids
        ]
    kinds = [kind] if kind else list(DISAGREEMENT_KINDS)
    return [tid for k in kinds for tid in report.disagreement_ids.get(k, [])]


def _pct(value: float | None) -> str:
    return "undefined" if value is None else f"{value * 100:.1f}%"


def agent_lines(agents: dict | None) -> list[str]:
    """The agent block (``AgentReport.as_json()``) as terminal lines; none without."""
    if agents is None:
        return []
    lines = []
    for name, key in (("outcome", "outcome"), ("trajectory", "path")):
        f = agents[key]
        rate = f["pass_rate"]
        gates = "gating" if f["gating"] else "non-gating"
        hat = ", ".join(
            f"pass^{p['k']} {_pct(p['pass_hat_k'])} "
            f"[{_pct(p['pass_hat_k_low'])}, {_pct(p['pass_hat_k_high'])}]"
            for p in f["pass_k"]
            if p["pass_hat_k"] is not None
        )
        lines.append(
            f"{name} ({', '.join(agents[key + '_keys'])}; {gates}): {_pct(rate['mean'])} "
            f"[{_pct(rate['ci_low'])}, {_pct(rate['ci_high'])}]; {hat}"
        )
    cells = (
        ("outcome pass, trajectory pass", "both_pass"),
        ("outcome pass, trajectory fail", "outcome_only"),
        ("outcome fail, trajectory pass", "path_only"),
        ("outcome fail, trajectory fail", "both_fail"),
    )
    errored = agents.get("errored_trials", 0)
    lines.append(
        f"outcome x trajectory ({agents['in_table']} trials; {agents['left_out']} left out, "
        f"a side errored or missing; {errored} errored trial{'' if errored == 1 else 's'}, "
        "neither pass nor fail):"
    )
    for label, key in cells:
        c = agents[key]
        lines.append(
            f"  {label}: {c['trials']} ({_pct(c['share'])} [{_pct(c['low'])}, {_pct(c['high'])}])"
        )
    for g in agents["groups"]:
        lines.append(f"  {g['count']} x {g['label']}")
    return lines
