"""Bulk ingest: one request posts a whole run recorded elsewhere (``POST /api/ingest``); the
reference is docs/ingest.md.

Shapes: JSON ``{"suite", "suite_kind"?, "run", "model"?, "source_version"?, "threshold"?,
"run_key"?, "trials": [record, ...]}``; NDJSON the header on line 1, then a record per line.
A record has the CSV/JSONL import's fields (``interop.importers.trial_row.row_parse``)
plus ``labels`` (``[{"reviewer", "verdict", "critique"?}]``) and ``extra``; ``error_message``
may stand for ``error``. Any other key is refused.

Rules:
1. All or nothing in one transaction; the first bad record raises ``DomainError`` (record,
   field), the idempotency row rolled back too.
2. ``NaN``/``Infinity`` (token or string) only as a score: "not scored", never 0.
3. Idempotency: the key (``Idempotency-Key`` or ``run_key``) is claimed by inserting an
   ``IngestKey`` row first (a concurrent request waits, then replays); the same body
   (SHA-256) replays the stored answer; another body is a ``DomainError`` ("conflict").
4. A body over ``max_bytes`` or a record over ``max_record_bytes`` is ``too_large`` (413),
   checked while reading.
5. The suite row is locked (PostgreSQL ``FOR UPDATE``), so two ingests into one new suite
   cannot collide on its cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, overload

from core.errors import DomainError, value_shown
from core.strict_json import contains_non_finite
from core.text import UNSTORABLE, contains_unstorable
from evals.models import Suite, Trial
from interop.importers.reader import record_error
from interop.importers.tabular import FIELDS
from interop.importers.trial_row import (
    OVERFLOW,
    CaseMemo,
    Row,
    contains_overflow,
)
from interop.importers.trial_row import row_parse as _row_parse
from interop.importers.trials_writer import LabelSpec, TrialSpec

HEADER_FIELDS = ("suite", "suite_kind", "run", "model", "source_version", "threshold", "run_key")
# ``error_message``: an alias of tabular's ``error`` (either, not both).
ERROR_MESSAGE = "error_message"
RECORD_FIELDS = (*FIELDS, "labels", "extra", ERROR_MESSAGE)
_FIELD_SET = frozenset(FIELDS)
_RECORD_SET = frozenset(RECORD_FIELDS)
LABEL_FIELDS = ("reviewer", "verdict", "critique")
NAME_MAX = 200
KEY_MAX = 255
FORMATS = ("json", "ndjson")
# Trials per write batch: fewer round trips than the file import's 1,000 (measured in
# bench/bench_ingest.py); memory stays bounded by tabular's BATCH_CHARS of outputs.
BATCH_SIZE = 5000


@dataclass(frozen=True)
class IngestHeader:
    """The run-level part: suite (created with ``suite_kind`` when absent), run name, model,
    source version, pass threshold in [0, 1] for score-only records, run key."""

    suite: str
    run: str
    suite_kind: str | None = None
    model: str = ""
    source_version: str = ""
    threshold: float | None = None
    run_key: str | None = None


@dataclass(frozen=True)
class IngestOutcome:
    """What to answer: HTTP status, JSON body, and whether it is a stored replay."""

    status: int
    body: dict[str, Any]
    replayed: bool = False


@overload
def _header_string(
    obj: dict, name: str, record: int | None, *, required: Literal[True], max_len: int = ...
) -> str: ...
@overload
def _header_string(
    obj: dict, name: str, record: int | None, *, required: bool = ..., max_len: int = ...
) -> str | None: ...
def _header_string(
    obj: dict, name: str, record: int | None, *, required: bool = False, max_len: int = NAME_MAX
) -> str | None:
    value = obj.get(name)
    if value is None:
        if required:
            raise DomainError(detail=f"header: field {name}: missing", record=record, field=name)
        return None
    if not isinstance(value, str):
        raise DomainError(
            detail=f"header: field {name}: expected a string, got {value_shown(value)}",
            record=record,
            field=name,
        )
    value = value.strip()
    if contains_unstorable(value):
        raise DomainError(detail=f"header: field {name}: {UNSTORABLE}", record=record, field=name)
    if not value:
        raise DomainError(
            detail=f"header: field {name}: must not be empty", record=record, field=name
        )
    if len(value) > max_len:
        raise DomainError(
            detail=f"header: field {name}: longer than {max_len} characters ({len(value)})",
            record=record,
            field=name,
        )
    return value


def header_parse(obj: dict, *, record: int | None = None) -> IngestHeader:
    """Validate the header (``HEADER_FIELDS``, names trimmed); ``record`` 1 for NDJSON, None for
    JSON. Raises ``DomainError`` naming the field: unknown key, wrong type, bad name, unknown
    suite kind, threshold outside [0, 1]."""
    for name in obj:
        if name not in HEADER_FIELDS:
            raise DomainError(
                detail=f"header: field {name}: unknown field "
                f"(fields: {', '.join(HEADER_FIELDS)}, trials)",
                record=record,
                field=name,
            )
    if contains_non_finite(obj):
        bad = next(k for k, v in obj.items() if contains_non_finite(v))
        raise DomainError(
            detail=f"header: field {bad}: NaN/Infinity is not valid JSON", record=record, field=bad
        )
    kind = obj.get("suite_kind")
    if kind is not None and kind not in Suite.Kind.values:
        raise DomainError(
            detail=f"header: field suite_kind: expected one of "
            f"{', '.join(Suite.Kind.values)}, got {value_shown(kind)}",
            record=record,
            field="suite_kind",
        )
    threshold = obj.get("threshold")
    if threshold is not None and (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not 0 <= threshold <= 1
    ):
        raise DomainError(
            detail=(
                "header: field threshold: expected a number in [0, 1], "
                f"got {value_shown(threshold)}"
            ),
            record=record,
            field="threshold",
        )
    return IngestHeader(
        suite=_header_string(obj, "suite", record, required=True),
        run=_header_string(obj, "run", record, required=True),
        suite_kind=kind,
        model=_header_string(obj, "model", record) or "",
        source_version=_header_string(obj, "source_version", record) or "",
        threshold=None if threshold is None else float(threshold),
        run_key=_header_string(obj, "run_key", record, max_len=KEY_MAX),
    )


def _labels(value: Any, *, where: str, record: int) -> list[LabelSpec]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise record_error(
            where, "labels", "expected an array of {reviewer, verdict, critique}", record=record
        )
    labels: list[LabelSpec] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(value):
        path = f"labels[{i}]"
        if not isinstance(item, dict):
            raise record_error(
                where, path, "expected an object {reviewer, verdict, critique}", record=record
            )
        for key in item:
            if key not in LABEL_FIELDS:
                raise record_error(
                    where,
                    f"{path}.{key}",
                    f"unknown field (fields: {', '.join(LABEL_FIELDS)})",
                    record=record,
                )
        reviewer = item.get("reviewer")
        if not isinstance(reviewer, str) or not reviewer.strip() or len(reviewer) > NAME_MAX:
            raise record_error(
                where,
                f"{path}.reviewer",
                f"expected a non-empty name of at most {NAME_MAX} characters, "
                f"got {value_shown(reviewer)}",
                record=record,
            )
        if reviewer in seen:
            raise record_error(
                where,
                f"{path}.reviewer",
                f"reviewer {reviewer!r} already labeled this trial in labels[{seen[reviewer]}]",
                record=record,
            )
        seen[reviewer] = i
        verdict = item.get("verdict")
        if verdict not in ("pass", "fail") or not isinstance(verdict, str):
            raise record_error(
                where,
                f"{path}.verdict",
                f'expected "pass" or "fail", got {value_shown(verdict)}',
                record=record,
            )
        critique = item.get("critique")
        if critique is not None and not isinstance(critique, str):
            raise record_error(
                where,
                f"{path}.critique",
                f"expected a string or null, got {value_shown(critique)}",
                record=record,
            )
        labels.append(LabelSpec(reviewer=reviewer, verdict=verdict, critique=critique or ""))
    return labels


def record_parse(
    obj: dict,
    *,
    where: str,
    record: int,
    threshold: float | None,
    needs_scan: bool = True,
    cases: CaseMemo | None = None,
) -> TrialSpec:
    """One trial record -> ``TrialSpec``. ``needs_scan`` False skips the non-finite and
    unstorable-text scans (``IngestSource``); ``cases``: the ingest's ``trial_row.CaseMemo``.
    Raises ``DomainError`` (``record_error``) for an unknown key or what ``row_parse`` refuses."""
    tabular = obj.keys() <= _FIELD_SET
    if tabular:
        values = obj  # only tabular fields (most records): row_parse reads, never writes
    else:
        values = {}
        for key, value in obj.items():
            if key in _FIELD_SET:
                values[key] = value
            elif key not in _RECORD_SET:
                raise record_error(
                    where, key, f"unknown field (fields: {', '.join(RECORD_FIELDS)})", record=record
                )
    extra = obj.get("extra")
    if extra is None:
        extra = {}
    elif not isinstance(extra, dict):
        raise record_error(where, "extra", "expected an object", record=record)
    elif needs_scan and contains_non_finite(extra):
        raise record_error(where, "extra", "NaN/Infinity is not valid JSON", record=record)
    elif needs_scan and contains_unstorable(extra):
        raise record_error(where, "extra", UNSTORABLE, record=record)
    elif contains_overflow(extra):
        raise record_error(where, "extra", OVERFLOW, record=record)
    # The documented name ``error``, unless the record used the alias ``error_message``.
    error_field = ERROR_MESSAGE if ERROR_MESSAGE in obj else "error"
    if ERROR_MESSAGE in obj:
        if "error" in obj:
            raise record_error(
                where,
                ERROR_MESSAGE,
                "give the error message once: error or error_message, not both",
                record=record,
            )
        values["error"] = obj[ERROR_MESSAGE]
    spec = _row_parse(
        Row(
            where=where,
            values=values,
            extra={},
            is_csv=False,
            index=record,
            needs_scan=needs_scan,
            error_field=error_field,
        ),
        threshold=threshold,
        cases=cases,
    )
    spec.raw = extra
    if tabular:  # no labels, extra or agent fields: nothing more to read
        return spec
    if "labels" in obj:
        if needs_scan and contains_non_finite(obj["labels"]):
            raise record_error(where, "labels", "NaN/Infinity is not valid JSON", record=record)
        if needs_scan and contains_unstorable(obj["labels"]):
            raise record_error(where, "labels", UNSTORABLE, record=record)
        spec.labels = _labels(obj["labels"], where=where, record=record)
        if spec.labels and spec.status != Trial.Status.OK:
            raise record_error(
                where,
                "labels",
                f"a trial with status {spec.status!r} carries no verdict and is never labeled "
                f"(got {len(spec.labels)} label{'' if len(spec.labels) == 1 else 's'}): "
                "leave labels out",
                record=record,
            )
    return spec
