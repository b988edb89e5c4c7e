"""What a comparison needs from one run, as plain data (``RunData``), and its loaders: the
database (``run_data_get``), an ``export_run`` file (``run_data_from_file``) or its own dict.
Per-trial overall verdicts follow the run report's one rule
(``evals.grading.verdict.overall_codes``) whatever the source."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from core.bounds import COST_USD_QUANTUM
from core.decimals import decimal_plain
from core.errors import DomainError, value_shown
from core.text import unstorable_refuse
from evals.grading import verdict
from evals.grading.grader_set import GraderSet
from evals.grading.verdict import (
    ERRORED,
    FAIL,
    MISSING,
    PASS,
    PENDING,
    PIPELINE,
    grader_codes,
    overall_codes,
)
from evals.models import grade_skipped_placeholder
from evals.report.rows import RunRows, judge_version_label, run_rows_get, runs_rows_get

RUN_DATA_FORMAT = "assay-run-data"
RUN_FILE_FORMAT = "assay-run"
CENT = COST_USD_QUANTUM  # the cost column's decimals (core.bounds)


@dataclass(frozen=True)
class GraderInfo:
    """One grader of a run: ``key``, ``gating``, and when its grades came from judge
    versions, ``judge_version`` (label ``"<judge name>-v<number>"``; several joined with
    ", "), ``judge_name`` and ``judge_trusted`` (every version trusted); None otherwise."""

    key: str
    gating: bool
    judge_version: str | None = None
    judge_name: str | None = None
    judge_trusted: bool | None = None


@dataclass(frozen=True)
class CaseData:
    """One case of a run. ``verdicts``: overall verdict of each graded trial, every look; left out
    and counted: ``pipeline_errored``, ``grade_errored``, ``not_graded``; ``provisional``:
    gating grades from untrusted judge versions. Usage over finished trials: ``cost_known_usd``
    (USD), ``cost_unknown``, token sums and ``tokens_unknown``, ``latency_sum_ms``/``latency_n``.
    ``looks``: ``(passed, graded)`` per look: 0 the run's own trials, r the top-up's round r."""

    key: str
    content_hash: str
    tags: tuple[str, ...]
    verdicts: tuple[bool, ...]
    trials: int = 0
    pipeline_errored: int = 0
    grade_errored: int = 0
    not_graded: int = 0
    provisional: int = 0
    finished: int = 0
    cost_known_usd: Decimal = Decimal(0)
    cost_unknown: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_unknown: int = 0
    latency_sum_ms: float = 0.0
    latency_n: int = 0
    looks: tuple[tuple[int, int], ...] = ()

    @property
    def passed(self) -> int:
        return self.verdicts.count(True)  # verdicts are bools; read ~15 times per case

    @property
    def graded(self) -> int:
        return len(self.verdicts)


@dataclass(frozen=True)
class RunData:
    """A run as a comparison sees it. ``label``: "suite / run"; ``uuid``: "" when unknown (a
    foreign file); ``suite_kind``: "capability" or "regression"; ``source``: "database" or the
    file path."""

    label: str
    uuid: str
    name: str
    suite_name: str
    suite_kind: str
    status: str
    trials_per_case: int
    graders: tuple[GraderInfo, ...]
    cases: tuple[CaseData, ...]
    source: str = "database"
    judge_versions: dict[str, bool] = field(default_factory=dict)
    simulated: bool = False

    @property
    def trials_total(self) -> int:
        return sum(c.trials for c in self.cases)

    @property
    def pipeline_errored(self) -> int:
        return sum(c.pipeline_errored for c in self.cases)

    @property
    def grade_errored(self) -> int:
        return sum(c.grade_errored for c in self.cases)

    @property
    def provisional(self) -> int:
        return sum(c.provisional for c in self.cases)


def run_data_build(
    *,
    meta: dict[str, Any],
    grader_specs: object,
    cases: list[tuple],
    trials: list[tuple],
    grades: list[tuple],
    judges: dict[Any, tuple[str, str, bool]],
    usage: dict[Any, dict[str, Any]],
) -> RunData:
    """Assemble ``RunData`` from flat rows (no queries; shared by the database and file loaders).

    ``meta``: label, uuid, name, suite_name, suite_kind, status, trials_per_case, source;
    ``grader_specs``: the stored grader set; ``cases``: ``(case_id, key, content_hash, tags)``;
    ``trials``: ``(trial_id, case_id, status[, look])``; ``grades``: ``(trial_id, grader, code,
    gating, judge_version_id)``, code 1 pass, 0 fail, -1 errored, -2 not judged; ``judges``:
    judge_version_id -> (label, judge name, trusted); ``usage``: case_id -> sums.

    Whole-array numpy passes, never one per case or trial (~13 ms at 2,000 cases x 5 trials).
    Long by design: the arrays built first serve every later step."""
    # 1. Trials, read as columns.
    n_trials, n_cases = len(trials), len(cases)
    case_pos = {c[0]: i for i, c in enumerate(cases)}
    case_idx = np.fromiter(
        map(case_pos.__getitem__, map(itemgetter(1), trials)), dtype=np.int64, count=n_trials
    )
    status_code = {"ok": PASS, "error": PIPELINE}
    trial_codes = np.fromiter(
        map(status_code.get, map(itemgetter(2), trials), repeat(PENDING)),
        dtype=np.int64,
        count=n_trials,
    )
    widths = set(map(len, trials))
    if widths <= {3}:
        trial_look = np.zeros(n_trials, dtype=np.int64)
    else:
        looks = (
            map(itemgetter(3), trials)
            if min(widths) > 3
            else (t[3] if len(t) > 3 else 0 for t in trials)
        )
        trial_look = np.fromiter(looks, dtype=np.int64, count=n_trials)
    ok = trial_codes == PASS
    missing = np.where(ok, MISSING, trial_codes)

    # 2. Grades on ok trials (grades on errored or unfinished trials do not count).
    n_grades = len(grades)
    g_ids, g_keys, g_codes, g_gates, g_jvs = zip(*grades, strict=True) if grades else ((),) * 5
    trial_pos = dict(zip(map(itemgetter(0), trials), range(n_trials), strict=True))
    pos_all = np.fromiter(map(trial_pos.get, g_ids, repeat(-1)), np.int64, n_grades)
    counted = pos_all >= 0
    counted[counted] = ok[pos_all[counted]]
    g_pos = pos_all[counted]
    key_of = {k: i for i, k in enumerate(set(g_keys))}
    g_key = np.fromiter(map(key_of.__getitem__, g_keys), np.int64, n_grades)[counted]
    g_code = np.fromiter(g_codes, np.int64, n_grades)[counted]
    g_gate = np.fromiter(map(bool, g_gates), bool, n_grades)[counted]
    jv_of = [v for v in set(g_jvs) if v is not None]
    jv_index: dict[Any, int] = {None: -1, **{v: i for i, v in enumerate(jv_of)}}
    g_jv = np.fromiter(map(jv_index.__getitem__, g_jvs), np.int64, n_grades)[counted]
    # Graders with at least one counted grade, in a fixed order.
    key_index = {k: i for k, i in sorted(key_of.items()) if np.any(g_key == i)}
    specs = GraderSet.from_stored(grader_specs).gating_pairs
    by_set = dict(specs)
    # A judged verdict: a judge version's grade other than a not-judged rung.
    judged = (g_jv >= 0) & (g_code != MISSING)
    codes: dict[str, np.ndarray] = {}
    versions: dict[str, set] = {}
    gates = np.zeros(g_key.size, dtype=bool)
    for key, gi in key_index.items():
        mine = np.flatnonzero(g_key == gi)
        codes[key] = grader_codes(
            trial_codes=trial_codes, trial_pos=g_pos[mine], grade_codes=g_code[mine]
        )
        versions[key] = {jv_of[j] for j in np.unique(g_jv[mine][judged[mine]]).tolist()}
        gates[mine] = by_set[key] if key in by_set else g_gate[mine]
    # The set's graders in set order, then the others that graded, by key; the verdict
    # module decides which of them gate.
    keys = [k for k, _ in specs] + [k for k in key_index if k not in by_set]
    seen = {k: bool(g_gate[g_key == gi].any()) for k, gi in key_index.items()}
    gating = set(verdict.gating_keys(specs, seen))
    trusted = np.zeros(len(jv_of), dtype=bool)
    for j in np.unique(g_jv[judged & gates]).tolist():
        trusted[j] = judges[jv_of[j]][2]
    provisional_grade = judged & gates
    provisional_grade[provisional_grade] = ~trusted[g_jv[provisional_grade]]
    provisional = np.bincount(case_idx[g_pos[provisional_grade]], minlength=n_cases)
    overall = overall_codes([codes.get(k, missing) for k in keys if k in gating], trial_codes)

    grader_infos = []
    for key in keys:
        jvs = sorted(versions.get(key, ()), key=lambda v: judges[v][0])
        if jvs:
            names = sorted({judges[v][1] for v in jvs})
            grader_infos.append(
                GraderInfo(
                    key,
                    key in gating,
                    ", ".join(judges[v][0] for v in jvs),
                    ", ".join(names),
                    all(judges[v][2] for v in jvs),
                )
            )
        else:
            grader_infos.append(GraderInfo(key, key in gating))

    # 3. Per case.
    def per_case(mask: np.ndarray) -> list[int]:
        return np.bincount(case_idx[mask], minlength=n_cases).tolist()

    is_pass = overall == PASS
    graded = is_pass | (overall == FAIL)
    n_of = per_case(np.ones(n_trials, dtype=bool))
    pipeline_of = per_case(overall == PIPELINE)
    errored_of = per_case(overall == ERRORED)
    not_graded_of = per_case((overall == MISSING) | (overall == PENDING))
    graded_of = per_case(graded)
    order = np.argsort(case_idx, kind="stable")  # each case's trials in their given order
    verdict_flat = is_pass[order][graded[order]].tolist()
    verdict_bounds = [0, *np.cumsum(graded_of).tolist()]
    n_looks = int(trial_look.max(initial=0)) + 1
    looks_of: list[tuple[tuple[int, int], ...]]
    if n_looks == 1:
        looks_of = [((p, g),) for p, g in zip(per_case(is_pass), graded_of, strict=True)]
    else:
        cells = case_idx * n_looks + trial_look
        look_passed = np.bincount(cells[is_pass], minlength=n_cases * n_looks)
        look_graded = np.bincount(cells[graded], minlength=n_cases * n_looks)
        last_look = np.zeros(n_cases, dtype=np.int64)
        np.maximum.at(last_look, case_idx, trial_look)
        looks_of = [
            tuple(
                zip(
                    look_passed[i * n_looks : i * n_looks + top + 1].tolist(),
                    look_graded[i * n_looks : i * n_looks + top + 1].tolist(),
                    strict=True,
                )
            )
            for i, top in enumerate(last_look.tolist())
        ]
    provisional_of = provisional.tolist()
    out = []
    for i, (case_id, key, digest, tags) in enumerate(cases):
        u = usage.get(case_id, {})
        out.append(
            CaseData(
                key=key,
                content_hash=digest,
                tags=tuple(map(str, tags or ())),
                verdicts=tuple(verdict_flat[verdict_bounds[i] : verdict_bounds[i + 1]]),
                trials=n_of[i],
                pipeline_errored=pipeline_of[i],
                grade_errored=errored_of[i],
                not_graded=not_graded_of[i],
                provisional=provisional_of[i],
                finished=int(u.get("finished") or 0),
                cost_known_usd=Decimal(u.get("cost") or 0).quantize(CENT),
                cost_unknown=int(u.get("cost_unknown") or 0),
                input_tokens=int(u.get("input_sum") or 0),
                output_tokens=int(u.get("output_sum") or 0),
                tokens_unknown=int(u.get("tokens_unknown") or 0),
                latency_sum_ms=float(u.get("latency_sum") or 0.0),
                latency_n=int(u.get("latency_n") or 0),
                looks=looks_of[i],
            )
        )
    return RunData(
        label=meta["label"],
        uuid=meta["uuid"],
        name=meta["name"],
        suite_name=meta["suite_name"],
        suite_kind=meta["suite_kind"],
        status=meta["status"],
        trials_per_case=int(meta["trials_per_case"]),
        graders=tuple(grader_infos),
        cases=tuple(out),
        source=meta.get("source", "database"),
        judge_versions={label: trusted for label, _, trusted in judges.values()},
        simulated=bool(meta.get("simulated")),
    )


def run_data_get(*, run: Any, top_up: int | None = None) -> RunData:
    """``RunData`` of a stored run, with ``top_up``'s rounds as looks 1.., from the run loader
    (``evals.report.rows.run_rows_get``: four queries whatever the size, one more when judges
    graded it). Output text is never loaded."""
    return _run_data_from_rows(run, run_rows_get(run=run, top_up=top_up))


def runs_data_get(*, runs: Sequence[Any], top_up: int | None = None) -> dict[int, RunData]:
    """Run id -> ``RunData`` for each of ``runs``, as ``run_data_get``, read together."""
    rows = runs_rows_get(runs=runs, top_up=top_up)
    return {run.id: _run_data_from_rows(run, rows[run.id]) for run in runs}


def _run_data_from_rows(run: Any, rows: RunRows) -> RunData:
    suite = run.suite
    meta = {
        "label": f"{suite.name} / {run.name}",
        "uuid": str(run.uuid),
        "name": run.name,
        "suite_name": suite.name,
        "suite_kind": suite.kind,
        "status": run.status,
        "trials_per_case": run.trials_per_case,
        "simulated": run.is_simulated,
    }
    return run_data_build(
        meta=meta,
        grader_specs=run.graders,
        cases=[(c[0], c[2], c[4], c[3]) for c in rows.cases],
        trials=list(map(itemgetter(0, 1, 2, 4), rows.trials)),
        grades=list(map(itemgetter(0, 1, 2, 4, 5), rows.grades)),
        judges={v: (j.label, j.name, j.trusted) for v, j in rows.judges.items()},
        usage=rows.usage,
    )


def run_data_from_export(data: dict[str, Any], *, source: str = "file") -> RunData:
    """``RunData`` from an ``export_run`` dict (no queries); judge trust as the file recorded it."""
    run = data["run"]
    judges = {
        ref: (
            judge_version_label(jv["judge"], int(jv["number"])),
            jv["judge"],
            bool(jv.get("trusted")),
        )
        for ref, jv in (data.get("judge_versions") or {}).items()
    }
    cases, trials, grades, usage = [], [], [], {}
    tid = 0
    for ci, case in enumerate(data["cases"]):
        cases.append((ci, case["key"], case["content_hash"], case.get("tags") or []))
        u = usage[ci] = {
            "finished": 0,
            "cost": Decimal(0),
            "cost_unknown": 0,
            "input_sum": 0,
            "output_sum": 0,
            "tokens_unknown": 0,
            "latency_sum": 0.0,
            "latency_n": 0,
        }
        for trial in case.get("trials") or []:
            if trial.get("top_up_round") is not None or trial.get("replaced"):
                continue  # a comparison's top-up or a retried attempt: not the run's own data
            tid += 1
            trials.append((tid, ci, trial["status"]))
            if trial["status"] in ("ok", "error"):
                _usage_add(u, trial)
            for g in trial.get("grades") or []:
                code = {"error": ERRORED, "not_judged": MISSING}.get(
                    g["status"], PASS if g["passed"] else FAIL
                )
                if g.get("judge_version") and grade_skipped_placeholder(g):
                    code = MISSING  # an older file's placeholder for a skipped rung
                grades.append(
                    (tid, g["grader"], code, bool(g.get("gating", True)), g.get("judge_version"))
                )
    meta = {
        "label": f"{run['suite']['name']} / {run['name']}",
        "uuid": run.get("uuid") or "",
        "name": run["name"],
        "suite_name": run["suite"]["name"],
        "suite_kind": run["suite"].get("kind", "regression"),
        "status": run["status"],
        "trials_per_case": run.get("trials_per_case") or 1,
        "source": source,
        "simulated": run.get("target_kind") == "simulated"
        or (isinstance(run.get("target"), dict) and run["target"].get("kind") == "simulated"),
    }
    return run_data_build(
        meta=meta,
        grader_specs=run.get("graders") or [],
        cases=cases,
        trials=trials,
        grades=grades,
        judges=judges,
        usage=usage,
    )


def _usage_add(u: dict[str, Any], trial: dict[str, Any]) -> None:
    u["finished"] += 1
    if trial.get("cost_usd") is None:
        u["cost_unknown"] += 1
    else:
        u["cost"] += Decimal(str(trial["cost_usd"]))
    if trial.get("input_tokens") is None or trial.get("output_tokens") is None:
        u["tokens_unknown"] += 1
    u["input_sum"] += trial.get("input_tokens") or 0
    u["output_sum"] += trial.get("output_tokens") or 0
    if trial.get("latency_ms") is not None:
        u["latency_sum"] += float(trial["latency_ms"])
        u["latency_n"] += 1


def run_data_to_dict(data: RunData) -> dict[str, Any]:
    """``RunData`` as strict JSON (``"assay-run-data"``); ``run_data_from_dict`` reads it back."""
    out = asdict(data)
    for case in out["cases"]:
        case["cost_known_usd"] = decimal_plain(case["cost_known_usd"])
    return {"format": RUN_DATA_FORMAT, "version": 1, **out}


def run_data_from_dict(data: dict[str, Any]) -> RunData:
    """Inverse of ``run_data_to_dict``. Raises ``DomainError`` naming the missing field."""
    try:
        return RunData(
            label=data["label"],
            uuid=data["uuid"],
            name=data["name"],
            suite_name=data["suite_name"],
            suite_kind=data["suite_kind"],
            status=data["status"],
            trials_per_case=int(data["trials_per_case"]),
            graders=tuple(GraderInfo(**g) for g in data["graders"]),
            cases=tuple(
                CaseData(
                    **{
                        **c,
                        "tags": tuple(c["tags"]),
                        "verdicts": tuple(c["verdicts"]),
                        "cost_known_usd": Decimal(c["cost_known_usd"]),
                    }
                )
                for c in data["cases"]
            ),
            source=data.get("source", "file"),
            judge_versions=data.get("judge_versions", {}),
            simulated=bool(data.get("simulated", False)),
        )
    except KeyError as exc:
        raise DomainError(detail=f"run data: missing field {exc.args[0]!r}") from exc


def run_data_from_file(path: str | Path) -> RunData:
    """``RunData`` from a JSON file of format ``"assay-run"`` (``export_run``) or
    ``"assay-run-data"``. Raises ``DomainError`` naming the file and the problem: bad JSON, an
    unknown format, unstorable text (naming the field, ``core.text``)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"), parse_constant=_no_constant)
    except (OSError, ValueError) as exc:  # JSON syntax, invalid UTF-8, non-finite numbers
        raise DomainError(detail=f"{path}: cannot read a run file ({exc})") from exc
    except RecursionError as exc:
        raise DomainError(
            detail=f"{path}: cannot read a run file (JSON nested too deeply)"
        ) from exc
    unstorable_refuse(data, where=str(path))  # a key or name no page or terminal can show
    fmt = data.get("format") if isinstance(data, dict) else None
    if fmt == RUN_FILE_FORMAT:
        try:
            return run_data_from_export(data, source=str(path))
        except (KeyError, TypeError) as exc:
            raise DomainError(detail=f"{path}: malformed run file (field {exc})") from exc
    if fmt == RUN_DATA_FORMAT:
        return run_data_from_dict({**data, "source": str(path)})
    raise DomainError(
        detail=(
            f'{path}: format must be "{RUN_FILE_FORMAT}" or "{RUN_DATA_FORMAT}", '
            f"got {value_shown(fmt)}"
        )
    )


def _no_constant(token: str) -> None:
    raise ValueError(f"non-finite number {token} is not strict JSON")


def verdict_lists(cases: Iterable[CaseData]) -> list[list[bool]]:
    """Per-case verdict lists, the input shape of ``stats.compare``."""
    return [list(c.verdicts) for c in cases]
