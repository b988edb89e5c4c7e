"""An ``export_run`` document read from outside (a gate's run file, ``POST /api/gate``'s
embedded runs): checked field by field, then read as ``RunData``."""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Any

from core import bounds
from core.errors import DomainError
from core.text import unstorable_refuse
from evals.comparison.run_data import RUN_FILE_FORMAT, RunData, run_data_from_export

FILE_TRIALS_PER_CASE_MAX = 100  # pass^k tables grow with k x N^2: bound what a body may ask
TRIAL_STATUSES = ("queued", "running", "ok", "error", "cancelled")


def _fail(where: str, message: str, field: str):
    raise DomainError(detail=f"{where}: {message}", field=field)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _check(cond: bool, where: str, message: str, field: str) -> None:
    if not cond:
        _fail(where, message, field)


def _obj(value: Any, where: str, field: str) -> dict:
    _check(isinstance(value, dict), where, "expected a JSON object", field)
    return value


def _list(value: Any, where: str, field: str) -> list:
    _check(isinstance(value, list), where, "expected a JSON list", field)
    return value


def _str(obj: dict, key: str, where: str, field: str, *, optional: bool = False) -> None:
    if optional and obj.get(key) is None:
        return
    _check(key in obj, where, f"missing field {key!r}", field)
    _check(isinstance(obj[key], str), f"{where}.{key}", "expected a string", field)


def _grade_check(g: Any, where: str, refs: dict, field: str) -> None:
    _obj(g, where, field)
    _str(g, "grader", where, field)
    _check(
        g.get("status") in ("ok", "error", "not_judged"),
        f"{where}.status",
        "expected 'ok', 'error' or 'not_judged'",
        field,
    )
    if g["status"] == "ok":
        _check(
            isinstance(g.get("passed"), bool),
            f"{where}.passed",
            "expected true or false (a JSON boolean) on an ok grade",
            field,
        )
    else:
        _check(
            g.get("passed") is None,
            f"{where}.passed",
            "expected null on an errored or not-judged grade",
            field,
        )
    _check(
        isinstance(g.get("gating", True), bool), f"{where}.gating", "expected a JSON boolean", field
    )
    ref = g.get("judge_version")
    _check(
        ref is None or (isinstance(ref, str) and ref in refs),
        f"{where}.judge_version",
        "expected null or a key of judge_versions",
        field,
    )


def _trial_check(t: Any, where: str, refs: dict, field: str) -> None:
    _obj(t, where, field)
    _check(
        t.get("status") in TRIAL_STATUSES,
        f"{where}.status",
        f"expected one of {', '.join(TRIAL_STATUSES)}",
        field,
    )
    for key in ("input_tokens", "output_tokens"):
        v = t.get(key)
        _check(
            v is None or (_is_int(v) and 0 <= v <= bounds.INT_MAX),
            f"{where}.{key}",
            f"expected null or a whole number from 0 to {bounds.INT_MAX:,}",
            field,
        )
    v = t.get("latency_ms")
    _check(
        v is None or (_is_number(v) and bounds.latency_problem(v) is None),
        f"{where}.latency_ms",
        f"expected null or milliseconds from 0 to {bounds.LATENCY_MS_MAX:,} (one day)",
        field,
    )
    v = t.get("cost_usd")
    if v is not None:
        try:
            ok = (
                isinstance(v, str | int | float)
                and not isinstance(v, bool)
                and Decimal(str(v)).is_finite()
            )
        except InvalidOperation:
            ok = False
        _check(ok, f"{where}.cost_usd", "expected null or a finite decimal (USD)", field)
    for k, g in enumerate(_list(t.get("grades", []), f"{where}.grades", field)):
        _grade_check(g, f"{where}.grades[{k}]", refs, field)


def run_document_check(data: Any, *, field: str) -> None:
    """Check that ``data`` is an ``export_run`` document (``assay-run``, version 1) with the types
    a comparison reads: no coercion, finite numbers, known statuses, existing judge version
    references, at most ``FILE_TRIALS_PER_CASE_MAX`` trials per case. Raises ``DomainError``
    naming ``field`` and the place (``head_file.cases[3].trials[0].grades[1].passed``).
    Long by design: one check per field of the document, in the format's order."""

    _obj(data, field, field)
    _check(
        data.get("format") == RUN_FILE_FORMAT,
        f"{field}.format",
        f"expected {RUN_FILE_FORMAT!r} (a file written by manage.py export_run)",
        field,
    )
    _check(
        _is_int(data.get("version")) and data["version"] == 1,
        f"{field}.version",
        "expected 1",
        field,
    )
    run = _obj(data.get("run"), f"{field}.run", field)
    for key in ("name", "status"):
        _str(run, key, f"{field}.run", field)
    _str(run, "uuid", f"{field}.run", field, optional=True)
    suite = _obj(run.get("suite"), f"{field}.run.suite", field)
    _str(suite, "name", f"{field}.run.suite", field)
    _check(
        suite.get("kind", "regression") in ("capability", "regression"),
        f"{field}.run.suite.kind",
        "expected 'capability' or 'regression'",
        field,
    )
    n = run.get("trials_per_case", 1)
    _check(
        _is_int(n) and 1 <= n <= FILE_TRIALS_PER_CASE_MAX,
        f"{field}.run.trials_per_case",
        f"expected a whole number from 1 to {FILE_TRIALS_PER_CASE_MAX}",
        field,
    )
    for i, spec in enumerate(_list(run.get("graders", []), f"{field}.run.graders", field)):
        where = f"{field}.run.graders[{i}]"
        _str(_obj(spec, where, field), "key", where, field)
        _check(
            isinstance(spec.get("gating", True), bool),
            f"{where}.gating",
            "expected a JSON boolean",
            field,
        )
    refs = _obj(data.get("judge_versions", {}), f"{field}.judge_versions", field)
    for ref, jv in refs.items():
        where = f"{field}.judge_versions[{ref}]"
        _str(_obj(jv, where, field), "judge", where, field)
        _check(
            _is_int(jv.get("number")) and jv["number"] >= 1,
            f"{where}.number",
            "expected a whole number >= 1",
            field,
        )
        _check(
            isinstance(jv.get("trusted", False), bool),
            f"{where}.trusted",
            "expected a JSON boolean",
            field,
        )
    seen: set[tuple[str, str]] = set()
    for i, case in enumerate(_list(data.get("cases"), f"{field}.cases", field)):
        where = f"{field}.cases[{i}]"
        _obj(case, where, field)
        _str(case, "key", where, field)
        _str(case, "content_hash", where, field)
        _check(
            (case["key"], case["content_hash"]) not in seen,
            where,
            "a second case with the same key and content_hash",
            field,
        )
        seen.add((case["key"], case["content_hash"]))
        tags = case.get("tags")
        _check(
            tags is None or (isinstance(tags, list) and all(isinstance(t, str) for t in tags)),
            f"{where}.tags",
            "expected a list of strings",
            field,
        )
        trials = _list(case.get("trials", []), f"{where}.trials", field)
        _check(
            len(trials) <= FILE_TRIALS_PER_CASE_MAX,
            f"{where}.trials",
            f"at most {FILE_TRIALS_PER_CASE_MAX} trials per case",
            field,
        )
        for j, t in enumerate(trials):
            _trial_check(t, f"{where}.trials[{j}]", refs, field)


def run_document_read(data: Any, *, field: str) -> RunData:
    """``RunData`` of an embedded ``export_run`` document; no queries. Raises ``DomainError``
    naming ``field`` and the place (unstorable text too, ``core.text``)."""

    unstorable_refuse(data, field=field)
    run_document_check(data, field=field)
    return run_data_from_export(data, source=field)
