"""What a comparison needs from one run, as plain data (``RunData``), and its loaders.

A ``RunData`` comes from the database (``run_data_get``), from a file written by
``manage.py export_run`` (``run_data_from_file``), or from its own dict
(``run_data_to_dict`` / ``run_data_from_dict``). Whatever the source, per-trial overall
verdicts are decided by the run report's one rule (``evals.grading.verdict.overall_codes``): a
trial passes when every gating grader passed; a failing gating grade makes it fail; an
errored gating grade with no failing one leaves it out (counted); pipeline errors are left
out (counted).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from core.decimals import decimal_plain
from core.errors import DomainError
from core.text import unstorable_refuse
from evals.grading.grader_set import GraderSet
from evals.grading.verdict import ERRORED, FAIL, MISSING, PASS, PENDING, PIPELINE, overall_codes
from evals.models import grade_skipped_placeholder
from evals.report.rows import judge_version_label, run_rows_get

RUN_DATA_FORMAT = "assay-run-data"
RUN_FILE_FORMAT = "assay-run"
CENT = Decimal("1e-8")


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
    """One case of a run. ``verdicts``: overall verdict of each graded trial (True pass,
    False fail); left out and counted: ``pipeline_errored`` trials, ``grade_errored``
    (ok trials with an errored gating grade and no failing one), ``not_graded`` (a gating
    grade missing, or the trial pending/cancelled). ``provisional``: gating grades on ok
    trials from a judge version that is not trusted. Usage over finished trials:
    ``cost_known_usd`` (sum of known costs, USD), ``cost_unknown`` (trials with a null
    cost), ``input_tokens``/``output_tokens`` (sums of known counts), ``tokens_unknown``
    (trials with either count null), ``latency_sum_ms``/``latency_n`` (known latencies).
    ``looks``: ``(passed, graded)`` per look — look 0 the run's own trials, look r the
    round r of the top-up the comparison reads (empty rounds are not listed); ``verdicts``
    covers every look."""

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
        return sum(self.verdicts)

    @property
    def graded(self) -> int:
        return len(self.verdicts)


@dataclass(frozen=True)
class RunData:
    """A run as a comparison sees it: identity, suite, grader set and per-case data.

    ``label``: "suite / run" for people; ``uuid`` as a string ("" when unknown, e.g. a
    file written by another tool); ``suite_kind``: "capability" or "regression";
    ``trials_per_case``: N; ``source``: "database" or the file path it was read from.
    """

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
    """Assemble ``RunData`` from flat rows (no queries; shared by the database and file
    loaders).

    ``meta``: label, uuid, name, suite_name, suite_kind, status, trials_per_case, source;
    ``grader_specs``: the run's stored grader set; ``cases``: ``(case_id, key,
    content_hash, tags)``; ``trials``: ``(trial_id, case_id, status)``; ``grades`` (on any
    trial): ``(trial_id, grader, code, gating, judge_version_id)`` with code 1 pass, 0 fail,
    -1 errored; ``judges``: judge_version_id -> (label, judge name, trusted); ``usage``:
    case_id -> {finished, cost, cost_unknown, input, output, tokens_unknown, latency_sum,
    latency_n}.
    Long by design: the trial and grade arrays built first are shared by every later step.
    """
    n_trials = len(trials)
    trial_pos = {t[0]: i for i, t in enumerate(trials)}
    case_pos = {c[0]: i for i, c in enumerate(cases)}
    case_idx = np.fromiter((case_pos[t[1]] for t in trials), dtype=np.int64, count=n_trials)
    status = [t[2] for t in trials]
    trial_look = np.fromiter(
        (t[3] if len(t) > 3 else 0 for t in trials), dtype=np.int64, count=n_trials
    )
    trial_codes = np.array(
        [PASS if s == "ok" else PIPELINE if s == "error" else PENDING for s in status],
        dtype=np.int64,
    )
    specs = GraderSet.from_stored(grader_specs).gating_pairs
    gating = dict(specs)
    keys = [k for k, _ in specs]
    grade_gating: dict[str, bool] = {}
    versions: dict[str, set] = {}
    codes: dict[str, np.ndarray] = {}
    provisional = np.zeros(len(cases), dtype=np.int64)
    for trial_id, grader, code, g_gating, jv in grades:
        pos = trial_pos.get(trial_id)
        if pos is None or trial_codes[pos] != PASS:
            continue  # grades on errored or unfinished trials do not count
        if grader not in gating:
            grade_gating[grader] = grade_gating.get(grader, False) or bool(g_gating)
        arr = codes.get(grader)
        if arr is None:
            arr = codes[grader] = np.where(trial_codes == PASS, MISSING, trial_codes)
        arr[pos] = ERRORED if code == -1 else int(code)
        if jv is not None and code != MISSING:  # a not-judged rung is no provisional verdict
            versions.setdefault(grader, set()).add(jv)
            gates = gating[grader] if grader in gating else bool(g_gating)
            if gates and not judges[jv][2]:
                provisional[case_idx[pos]] += 1
    for extra in sorted(grade_gating):
        keys.append(extra)
        gating[extra] = grade_gating[extra]
    missing = np.where(trial_codes == PASS, MISSING, trial_codes)
    overall = overall_codes([codes.get(k, missing) for k in keys if gating[k]], trial_codes)

    grader_infos = []
    for key in keys:
        jvs = sorted(versions.get(key, ()), key=lambda v: judges[v][0])
        if jvs:
            names = sorted({judges[v][1] for v in jvs})
            grader_infos.append(
                GraderInfo(
                    key,
                    gating[key],
                    ", ".join(judges[v][0] for v in jvs),
                    ", ".join(names),
                    all(judges[v][2] for v in jvs),
                )
            )
        else:
            grader_infos.append(GraderInfo(key, gating[key]))

    order = np.argsort(case_idx, kind="stable")
    bounds = np.searchsorted(case_idx[order], np.arange(len(cases) + 1))
    out = []
    for i, (case_id, key, digest, tags) in enumerate(cases):
        mine = overall[order[bounds[i] : bounds[i + 1]]]
        my_looks = trial_look[order[bounds[i] : bounds[i + 1]]]
        looks = tuple(
            (
                int(np.count_nonzero((mine == PASS) & (my_looks == lk))),
                int(np.count_nonzero(((mine == PASS) | (mine == FAIL)) & (my_looks == lk))),
            )
            for lk in range(int(my_looks.max(initial=0)) + 1)
        )
        u = usage.get(case_id, {})
        out.append(
            CaseData(
                key=key,
                content_hash=digest,
                tags=tuple(str(t) for t in (tags or [])),
                verdicts=tuple(bool(c == PASS) for c in mine if c in (PASS, FAIL)),
                trials=int(mine.size),
                pipeline_errored=int(np.count_nonzero(mine == PIPELINE)),
                grade_errored=int(np.count_nonzero(mine == ERRORED)),
                not_graded=int(np.count_nonzero((mine == MISSING) | (mine == PENDING))),
                provisional=int(provisional[i]),
                finished=int(u.get("finished") or 0),
                cost_known_usd=Decimal(u.get("cost") or 0).quantize(CENT),
                cost_unknown=int(u.get("cost_unknown") or 0),
                input_tokens=int(u.get("input_sum") or 0),
                output_tokens=int(u.get("output_sum") or 0),
                tokens_unknown=int(u.get("tokens_unknown") or 0),
                latency_sum_ms=float(u.get("latency_sum") or 0.0),
                latency_n=int(u.get("latency_n") or 0),
                looks=looks,
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
    """``RunData`` of a run in the database as a comparison reads it: its own trials, and
    with ``top_up`` (a ``TopUp`` id) that top-up's rounds as looks 1.. — from the one run loader
    (``evals.report.rows.run_rows_get``: four queries whatever the run's size, one more when
    judges graded it; plus one for ``run.suite`` unless joined). Output text is never
    loaded."""
    rows = run_rows_get(run=run, top_up=top_up)
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
        trials=[(t[0], t[1], t[2], t[4]) for t in rows.trials],
        grades=[(g[0], g[1], g[2], g[4], g[5]) for g in rows.grades],
        judges={v: (j.label, j.name, j.trusted) for v, j in rows.judges.items()},
        usage=rows.usage,
    )


def run_data_from_export(data: dict[str, Any], *, source: str = "file") -> RunData:
    """``RunData`` from a dict in the ``export_run`` format (``interop.run_file``); no
    queries. Judge trust is as recorded in the file at export time."""
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
    """Strict-JSON-safe dict of a ``RunData`` (Decimals as strings), format
    ``"assay-run-data"``; ``run_data_from_dict`` reads it back equal."""
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
    """``RunData`` from a JSON file written by ``manage.py export_run`` (format
    ``"assay-run"``) or by ``run_data_to_dict`` (``"assay-run-data"``). Raises ``DomainError``
    (naming the file and the problem) for unreadable JSON, an unknown format, or text the
    database cannot store (U+0000, a lone surrogate; naming the field: ``core.text``)."""
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
        detail=f"{path}: format must be {RUN_FILE_FORMAT!r} or {RUN_DATA_FORMAT!r}, got {fmt!r}"
    )


def _no_constant(token: str) -> None:
    raise ValueError(f"non-finite number {token} is not strict JSON")


def verdict_lists(cases: Iterable[CaseData]) -> list[list[bool]]:
    """Per-case verdict lists, the input shape of ``stats.compare``."""
    return [list(c.verdicts) for c in cases]
