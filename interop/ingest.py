"""Bulk ingest: one request posts a whole run recorded elsewhere (``POST /api/ingest``).

Shapes (``docs/ingest.md`` has the full reference):
- JSON: ``{"suite", "suite_kind"?, "run", "model"?, "source_version"?, "threshold"?,
  "run_key"?, "trials": [record, ...]}``;
- NDJSON: line 1 the same header object without ``trials``, then one record per line,
  read from the stream line by line.

A trial record uses the field vocabulary and the rules of the CSV/JSONL import
(``evals.importers.tabular``: ``case_id``, ``input``, ``expected``, ``tags``, ``output``,
``attempt``, ``passed``, ``score``, ``scores``, ``judge_status``, ``reason``, ``grader``,
``model``, ``input_tokens``, ``output_tokens``, ``latency_ms``, ``cost_usd``,
``created_at``; parsed by its ``row_parse``) plus ``labels`` (``[{"reviewer", "verdict":
"pass"|"fail", "critique"?}]``, stored as imported ``labeling.Label`` rows) and ``extra``
(an object kept in ``Trial.raw_response["extra"]``). Any other key is refused.

Rules:
1. All or nothing: everything is written in one transaction; the first bad record raises
   ``DomainError`` (record, field) and nothing stays behind, the idempotency row included.
2. A bare ``NaN``/``Infinity`` token or a ``"NaN"`` string is accepted only as a score and
   means "not scored" (an errored grade, never 0, never a fail); anywhere else it is refused.
3. Idempotency: a key (``Idempotency-Key`` header or ``run_key``) is claimed by inserting
   an ``IngestKey`` row first in the transaction (unique: a concurrent request with the
   key waits, then replays); a repeat with the same body bytes (SHA-256) gets the stored
   status and response and writes nothing; another body under the key is a ``DomainError``
   (code "conflict").
4. Limits: the body over ``max_bytes`` or one record over ``max_record_bytes`` raises
   a ``DomainError`` (code "too_large", HTTP 413), checked while reading.
5. One ingest into a suite at a time: the suite row is locked (PostgreSQL
   ``SELECT ... FOR UPDATE``; SQLite writes are serialised anyway), so two runs posted
   into one new suite at once cannot collide on its cases.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from django.db import IntegrityError, transaction

from core.errors import DomainError
from core.strict_json import contains_non_finite, json_loads_line
from evals.models import IngestKey, Run, Suite
from interop.importers.context import ImportContext, ImportSummary
from interop.importers.reader import BOM, record_error
from interop.importers.reader import jsonl_records as _jsonl_records
from interop.importers.tabular import (
    FIELDS,
    OVERFLOW,
    UNSTORABLE,
    LabelSpec,
    Row,
    TrialSpec,
    TrialsWriter,
    contains_overflow,
    contains_unstorable,
)
from interop.importers.tabular import row_parse as _row_parse

HEADER_FIELDS = ("suite", "suite_kind", "run", "model", "source_version", "threshold", "run_key")
RECORD_FIELDS = (*FIELDS, "labels", "extra")
LABEL_FIELDS = ("reviewer", "verdict", "critique")
NAME_MAX = 200
KEY_MAX = 255
FORMATS = ("json", "ndjson")
_CHUNK = 1024 * 1024
# Trials per write batch: fewer round trips than the file import's 1,000 (measured in
# bench/bench_ingest.py); memory stays bounded by tabular's BATCH_CHARS of outputs.
BATCH_SIZE = 5000


@dataclass(frozen=True)
class IngestHeader:
    """The run-level part of an ingest: suite name (created when absent, with
    ``suite_kind``; default regression), run name, optional model, source version, pass
    threshold in [0, 1] for score-only records, and the client's run key."""

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


class _Body:
    """The raw request body, read once: counts bytes against ``max_bytes`` (413) and hashes
    every byte read (SHA-256), so a replay can be recognised after the fact."""

    def __init__(self, stream: BinaryIO, *, max_bytes: int) -> None:
        self._stream, self.max_bytes = stream, max_bytes
        self.size = 0
        self._hash = hashlib.sha256()

    def _count(self, data: bytes) -> bytes:
        self.size += len(data)
        if self.size > self.max_bytes:
            raise DomainError(
                code="too_large",
                detail=f"request body: over the limit of {self.max_bytes:,} bytes "
                f"(ASSAY INGEST_MAX_BYTES)",
                limit=self.max_bytes,
            )
        self._hash.update(data)
        return data

    def read(self) -> bytes:
        """The rest of the body (at most ``max_bytes`` + 1 bytes are ever read)."""
        return self._count(self._stream.read(self.max_bytes - self.size + 1))

    def readline(self, limit: int) -> bytes:
        return self._count(self._stream.readline(limit))

    def drain(self) -> None:
        """Read (and hash) whatever is left."""
        while self._count(self._stream.read(_CHUNK)):
            pass

    def sha256(self) -> str:
        return self._hash.hexdigest()


_SUSPECT = re.compile(r"NaN|Infinity|\\u(?:0000|[dD][89a-fA-F])")
_SUSPECT_BYTES = re.compile(_SUSPECT.pattern.encode())


def _suspect(text: str | bytes) -> bool:
    """Whether a record's JSON text may hold a NaN/Infinity token or a ``\\u0000`` or
    surrogate escape; records without any are not scanned for them (rows of 300-character
    outputs parse ~10% faster). (A number overflowing to infinity, ``1e400``, is looked for
    in ``input``, ``expected`` and ``extra`` always: that check is cheap.)"""
    pattern = _SUSPECT_BYTES if isinstance(text, bytes) else _SUSPECT
    return pattern.search(text) is not None


class IngestSource:
    """A parsed request body: ``header`` (a dict), ``records()`` yielding ``(record, where,
    object, needs_scan)`` for each trial record (False when the record's text holds no
    ``NaN``/``Infinity`` token, no ``\\u0000`` or surrogate escape, so no scan is needed),
    ``finish()`` reading what is left, ``sha256()``."""

    fmt = ""

    def __init__(self, stream: BinaryIO, *, max_bytes: int, max_record_bytes: int) -> None:
        self.body = _Body(stream, max_bytes=max_bytes)
        self.max_record_bytes = max_record_bytes
        self.header: dict[str, Any] = {}

    def records(self) -> Iterator[tuple[int, str, dict, bool]]:
        raise NotImplementedError

    def finish(self) -> None:
        self.body.drain()

    def sha256(self) -> str:
        return self.body.sha256()


class JsonSource(IngestSource):
    """``application/json``: the whole body is read and parsed (at most ``max_bytes``);
    the header is the top-level object without ``trials``. A record's size is the length of
    its compact JSON encoding (UTF-8)."""

    fmt = "json"

    def __init__(self, stream: BinaryIO, *, max_bytes: int, max_record_bytes: int) -> None:
        super().__init__(stream, max_bytes=max_bytes, max_record_bytes=max_record_bytes)
        data = self.body.read()
        if data.startswith(BOM):
            data = data[len(BOM) :]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DomainError(detail=f"request body: invalid UTF-8 at byte {exc.start}") from None
        try:
            obj = json_loads_line(text)
        except ValueError as exc:
            raise DomainError(detail=f"request body: invalid JSON: {exc}") from None
        except RecursionError:
            raise DomainError(detail="request body: JSON nested too deeply") from None
        if not isinstance(obj, dict):
            raise DomainError(
                detail="request body: expected a JSON object {suite, run, trials, ...}"
            )
        if "trials" not in obj:
            raise DomainError(
                detail="field trials: missing (an array of trial records)", field="trials"
            )
        trials = obj.pop("trials")
        if not isinstance(trials, list):
            raise DomainError(
                detail="field trials: expected an array of trial records", field="trials"
            )
        self.header, self._trials = obj, trials
        self._needs_scan = _suspect(text)
        # No record can be larger than the whole body: measure only when that is possible.
        self._measure = len(data) > max_record_bytes

    def records(self) -> Iterator[tuple[int, str, dict, bool]]:
        for i, obj in enumerate(self._trials):
            where = f"trials[{i}]"
            if not isinstance(obj, dict):
                raise DomainError(detail=f"{where}: expected a JSON object", record=i)
            if self._measure:
                size = len(
                    json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=repr).encode(
                        "utf-8"
                    )
                )
                if size > self.max_record_bytes:
                    raise DomainError(
                        code="too_large",
                        detail=f"{where}: the record is {size:,} bytes, over the limit of "
                        f"{self.max_record_bytes:,} bytes (ASSAY INGEST_MAX_RECORD_BYTES)",
                        limit=self.max_record_bytes,
                        record=i,
                    )
            yield i, where, obj, self._needs_scan
        self._trials = []  # the parsed records are no longer needed


class NdjsonSource(IngestSource):
    """``application/x-ndjson`` (or ``application/jsonl``): read line by line from the
    stream; memory is bounded by the longest line (at most ``max_record_bytes``, line end
    not counted). Line 1 (the first non-blank line) is the header; decoding, BOM and line
    ending rules are those of every text import (``evals.importers.reader``)."""

    fmt = "ndjson"

    def __init__(self, stream: BinaryIO, *, max_bytes: int, max_record_bytes: int) -> None:
        super().__init__(stream, max_bytes=max_bytes, max_record_bytes=max_record_bytes)
        self._line = 0
        self._raw = b""  # the last line read: the one whose object is being parsed
        self._objects = _jsonl_records(self._lines())
        first = self._next()
        if first is None:
            raise DomainError(
                detail="request body: empty (line 1 must be the header object)", record=1
            )
        line, self.header = first
        if "trials" in self.header:
            raise DomainError(
                detail=f"line {line}: field trials: not allowed in an NDJSON header "
                f"(one trial record per line follows it)",
                record=line,
                field="trials",
            )

    def _lines(self) -> Iterator[bytes]:
        limit = self.max_record_bytes
        while True:
            raw = self.body.readline(limit + 2)  # room for CRLF after a full-size record
            if not raw:
                return
            self._line += 1
            if len(raw.rstrip(b"\r\n")) > limit:
                raise DomainError(
                    code="too_large",
                    detail=f"line {self._line}: the record is over the limit of {limit:,} bytes "
                    f"(ASSAY INGEST_MAX_RECORD_BYTES)",
                    limit=limit,
                    record=self._line,
                )
            self._raw = raw
            yield raw

    def _next(self) -> tuple[int, dict] | None:
        try:
            return next(self._objects)
        except StopIteration:
            return None
        except DomainError as exc:
            if exc.code != "invalid":
                raise  # a line over the limit (413) stays what it is
            raise DomainError(detail=str(exc), field=exc.field, record=self._line) from None
        except RecursionError:
            raise DomainError(
                detail=f"line {self._line}: JSON nested too deeply", record=self._line
            ) from None

    def records(self) -> Iterator[tuple[int, str, dict, bool]]:
        while (item := self._next()) is not None:
            line, obj = item
            raw = self._raw
            yield line, f"line {line}", obj, _suspect(raw)


def source_open(
    *, fmt: str, stream: BinaryIO, max_bytes: int, max_record_bytes: int
) -> IngestSource:
    """Start reading a body of ``fmt`` (``json`` or ``ndjson``); reads the header.

    Raises ``DomainError`` (bad JSON, no header; code "too_large" over a limit).
    """
    cls = JsonSource if fmt == "json" else NdjsonSource
    return cls(stream, max_bytes=max_bytes, max_record_bytes=max_record_bytes)


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
            detail=f"header: field {name}: expected a string, got {value!r:.80}",
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
    """Validate the header object (keys ``HEADER_FIELDS``; surrounding spaces of names are
    trimmed as in the file import). ``record``: 1 for NDJSON (line 1), None for JSON.

    Raises ``DomainError`` naming the field: unknown key, wrong type, empty or too-long name,
    unknown suite kind, threshold not a number in [0, 1].
    """
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
            f"{', '.join(Suite.Kind.values)}, got {kind!r:.80}",
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
            detail=f"header: field threshold: expected a number in [0, 1], got {threshold!r:.80}",
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
                f"expected a non-empty name of at most {NAME_MAX} characters, got {reviewer!r:.80}",
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
                f"expected 'pass' or 'fail', got {verdict!r:.80}",
                record=record,
            )
        critique = item.get("critique")
        if critique is not None and not isinstance(critique, str):
            raise record_error(
                where,
                f"{path}.critique",
                f"expected a string or null, got {critique!r:.80}",
                record=record,
            )
        labels.append(LabelSpec(reviewer=reviewer, verdict=verdict, critique=critique or ""))
    return labels


def record_parse(
    obj: dict, *, where: str, record: int, threshold: float | None, needs_scan: bool = True
) -> TrialSpec:
    """One trial record -> ``TrialSpec`` (tabular's ``row_parse`` plus labels and extra);
    ``needs_scan`` False (see ``IngestSource``) skips the scans for non-finite numbers and
    unstorable text.

    Raises ``DomainError`` (``field``, ``record``, extra ``where``; ``record_error``) for an
    unknown key or any field ``row_parse`` refuses.
    """
    values: dict[str, Any] = {}
    for key, value in obj.items():
        if key in FIELDS:
            values[key] = value
        elif key not in ("labels", "extra"):
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
    spec = _row_parse(
        Row(
            where=where, values=values, extra={}, is_csv=False, index=record, needs_scan=needs_scan
        ),
        threshold=threshold,
    )
    spec.raw = extra
    if "labels" in obj:
        if needs_scan and contains_non_finite(obj["labels"]):
            raise record_error(where, "labels", "NaN/Infinity is not valid JSON", record=record)
        if needs_scan and contains_unstorable(obj["labels"]):
            raise record_error(where, "labels", UNSTORABLE, record=record)
        spec.labels = _labels(obj["labels"], where=where, record=record)
    return spec


def _run_write(*, header: IngestHeader, source: IngestSource, user: Any) -> ImportSummary:
    """Create the suite (if absent) and the run, then write every record; inside the
    caller's transaction. Raises ``DomainError``."""
    header_record = 1 if source.fmt == "ndjson" else None
    suite, _ = Suite.objects.get_or_create(
        name=header.suite, defaults={"kind": header.suite_kind or Suite.Kind.REGRESSION}
    )
    suite = Suite.objects.select_for_update().get(pk=suite.pk)
    if header.suite_kind is not None and suite.kind != header.suite_kind:
        raise DomainError(
            detail=f"header: field suite_kind: suite {suite.name!r} exists with kind "
            f"{suite.kind!r}, not {header.suite_kind!r}",
            record=header_record,
            field="suite_kind",
        )
    if Run.objects.filter(suite=suite, name=header.run).exists():
        raise DomainError(
            detail=f"header: field run: run {header.run!r} already exists in suite "
            f"{suite.name!r}; choose a new name",
            record=header_record,
            field="run",
        )
    summary = ImportSummary(suite=suite, format=f"ingest-{source.fmt}")
    ctx = ImportContext(suite=suite, run_name=header.run, filename="", summary=summary, user=user)
    run = ctx.run_create(
        name=header.run,
        fmt=f"ingest-{source.fmt}",
        model=header.model,
        source_version=header.source_version,
        extra={"via": "POST /api/ingest"},
    )
    writer = TrialsWriter(ctx=ctx, run=run, batch_size=BATCH_SIZE)
    try:
        for record, where, obj, non_finite in source.records():
            writer.add(
                record_parse(
                    obj,
                    where=where,
                    record=record,
                    threshold=header.threshold,
                    needs_scan=non_finite,
                )
            )
        if writer.added == 0:
            raise DomainError(
                detail="field trials: at least one trial record is required", field="trials"
            )
        writer.finish()
    except RecursionError:
        raise DomainError(detail="a record is nested too deeply to be checked") from None
    return summary


class _KeyTaken(Exception):
    """Another request holds (or committed) the idempotency key."""


def _replay(*, key: str, field: str, source: IngestSource) -> IngestOutcome:
    stored = IngestKey.objects.get(key=key)
    source.finish()
    if stored.body_sha256 != source.sha256():
        raise DomainError(
            detail=f"{field} {key!r} was already used with a different request body; "
            "use a new key for a new run",
            field=field,
            code="conflict",
            key=key,
        )
    return IngestOutcome(status=stored.status_code, body=json.loads(stored.response), replayed=True)


def ingest_submit(
    *,
    source: IngestSource,
    user: Any,
    idempotency_key: str | None,
    respond: Callable[[Run, ImportSummary], dict[str, Any]],
) -> IngestOutcome:
    """Store one posted run all or nothing; idempotent under a key (rules in the module doc).

    ``source``: the opened body (``source_open``); ``idempotency_key``: the
    ``Idempotency-Key`` header or None; ``respond(run, summary)`` builds the 201 body
    (stored with the key for replays). Returns ``IngestOutcome`` (201, or the stored
    status and body of the first request under the key).
    Raises ``DomainError``: 400, code "too_large" (413), code "conflict" (409).
    """
    record = 1 if source.fmt == "ndjson" else None
    header = header_parse(source.header, record=record)
    key, field = idempotency_key, "Idempotency-Key"
    if key is not None and header.run_key is not None and key != header.run_key:
        raise DomainError(
            detail="header: field run_key: differs from the Idempotency-Key header "
            "(send one, or the same value in both)",
            record=record,
            field="run_key",
        )
    if key is None and header.run_key is not None:
        key, field = header.run_key, "run_key"
    if key is not None and IngestKey.objects.filter(key=key).exists():
        return _replay(key=key, field=field, source=source)
    try:
        with transaction.atomic():
            claim = None
            if key is not None:
                try:
                    with transaction.atomic():
                        claim = IngestKey.objects.create(
                            key=key,
                            user=user if getattr(user, "is_authenticated", False) else None,
                            body_sha256="",
                            status_code=0,
                            response="",
                        )
                except IntegrityError:
                    raise _KeyTaken from None
            summary = _run_write(header=header, source=source, user=user)
            source.finish()
            run = summary.runs[0]
            body = respond(run, summary)
            if claim is not None:
                claim.body_sha256, claim.run, claim.status_code = source.sha256(), run, 201
                claim.response = json.dumps(body, ensure_ascii=False, allow_nan=False)
                claim.save(update_fields=["body_sha256", "run", "status_code", "response"])
    except _KeyTaken:
        return _replay(key=key, field=field, source=source)
    return IngestOutcome(status=201, body=body)
