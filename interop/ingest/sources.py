"""Reading an ingest body: JSON or NDJSON, within the size limits, as records with their
place in the body (a 413 ``DomainError`` over a limit, a 400 naming the place otherwise)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator

# typeshed leaves out json.encoder.c_make_encoder (the C encoder, or None without it).
from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
from json.encoder import encode_basestring
from typing import Any, Protocol

from core.bounds import body_limit_bytes
from core.errors import DomainError
from core.gc_pause import gc_paused_call
from core.strict_json import json_loads_line
from interop.importers.reader import BOM
from interop.importers.reader import jsonl_records as _jsonl_records

_CHUNK = 1024 * 1024
# Objects and arrays a record may hold: a bound on the memory one parsed line takes.
RECORD_MAX_CONTAINERS = 100_000


class ByteStream(Protocol):
    """What a body is read from: a binary file, or Django's ``HttpRequest`` (its WSGI
    stream); ``read(n)`` returns at most ``n`` bytes, b"" at the end."""

    def read(self, n: int, /) -> bytes: ...


class _Body:
    """The raw request body, read once: bytes counted against ``max_bytes`` (413) and hashed
    (SHA-256) to recognise a replay."""

    def __init__(self, stream: ByteStream, *, max_bytes: int) -> None:
        self._stream, self.max_bytes = stream, max_bytes
        self.limit_name = "ASSAY INGEST_MAX_BYTES"  # what the 413 names
        self.size = 0
        self._hash = hashlib.sha256()

    def _count(self, data: bytes) -> bytes:
        self.size += len(data)
        if self.size > self.max_bytes:
            raise DomainError(
                code="too_large",
                detail=f"request body: over the limit of {self.max_bytes:,} bytes "
                f"({self.limit_name})",
                limit=self.max_bytes,
            )
        self._hash.update(data)
        return data

    def read(self) -> bytes:
        """The rest of the body (at most ``max_bytes`` + 1 bytes are ever read)."""
        return self._count(self._stream.read(self.max_bytes - self.size + 1))

    def read_chunk(self, size: int) -> bytes:
        """At most ``size`` more bytes (b"" at the end); reads one byte past ``max_bytes``
        when there, so an oversized body is a 413 here."""
        return self._count(self._stream.read(min(size, self.max_bytes - self.size + 1)))

    def drain(self) -> None:
        """Read (and hash) whatever is left."""
        while self._count(self._stream.read(_CHUNK)):
            pass

    def sha256(self) -> str:
        return self._hash.hexdigest()


_SUSPECT = re.compile(r"NaN|Infinity|\\u(?:0000|[dD][89a-fA-F])")


_SUSPECT_BYTES = re.compile(_SUSPECT.pattern.encode())


def _suspect(text: str | bytes) -> bool:
    """Whether a record's JSON text may hold a NaN/Infinity token or a ``\\u0000`` or surrogate
    escape; others skip those scans (~10% faster on 300-character outputs). ``1e400`` is always
    looked for in ``input``, ``expected`` and ``extra``."""
    if isinstance(text, bytes):
        return _SUSPECT_BYTES.search(text) is not None
    return _SUSPECT.search(text) is not None


# The C encoder that ``json.dumps(ensure_ascii=False, separators=(",", ":"), default=repr)``
# builds on every call, built once (a JSON body's 50,000 records are measured one by one).
_COMPACT = (
    _c_make_encoder(None, repr, encode_basestring, None, ":", ",", False, False, True)
    if _c_make_encoder is not None
    else None
)


def _compact_size(obj: Any) -> int:
    """UTF-8 bytes of ``obj`` as compact JSON (``NON_FINITE`` as its quoted token; a lone
    surrogate 3 bytes, refused later by its field's check)."""
    if _COMPACT is None:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=repr)
    else:
        text = "".join(_COMPACT(obj, 0))
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class IngestSource:
    """A parsed body: ``header``, ``records()`` yielding ``(record, where, object, needs_scan)``,
    ``finish()`` reading the rest, ``sha256()``."""

    fmt = ""

    def __init__(self, stream: ByteStream, *, max_bytes: int, max_record_bytes: int) -> None:
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
    """``application/json``: read and parsed whole (at most ``max_bytes`` and
    ``core.bounds.BODY_MAX_BYTES["ingest_json"]``); a record's size is its compact JSON's."""

    fmt = "json"

    def __init__(self, stream: ByteStream, *, max_bytes: int, max_record_bytes: int) -> None:
        super().__init__(stream, max_bytes=max_bytes, max_record_bytes=max_record_bytes)
        json_max = body_limit_bytes("ingest_json")
        if max_bytes > json_max:  # the view refuses a longer Content-Length; cap the read too
            self.body.max_bytes = json_max
            self.body.limit_name = "one JSON document; send a larger run as NDJSON"
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
                size = _compact_size(obj)
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
    """``application/x-ndjson`` (or ``application/jsonl``), read line by line (memory bounded by
    ``max_record_bytes``); line 1 the header; decoding as ``interop.importers.reader``."""

    fmt = "ndjson"

    def __init__(self, stream: ByteStream, *, max_bytes: int, max_record_bytes: int) -> None:
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
        """The body's physical lines with their LF, read in ``_CHUNK``-byte chunks (``readline`` per
        line cost ~15% of the reading). A line over the record limit is a 413 as soon as known, so
        memory stays bounded by a chunk and the limit."""
        limit = self.max_record_bytes
        tail = b""
        while chunk := self.body.read_chunk(_CHUNK):
            lines = (tail + chunk).split(b"\n") if tail else chunk.split(b"\n")
            tail = lines.pop()
            for raw in lines:
                self._line += 1
                if len(raw) > limit and len(raw.rstrip(b"\r")) > limit:
                    raise self._too_long()
                self._containers_check(raw)
                self._raw = raw
                yield raw + b"\n"
            if len(tail) > limit and len(tail.rstrip(b"\r")) > limit:
                self._line += 1
                raise self._too_long()
        if tail:
            self._line += 1
            self._containers_check(tail)
            self._raw = tail
            yield tail

    def _containers_check(self, raw: bytes) -> None:
        """Refuse a line of more than ``RECORD_MAX_CONTAINERS`` objects and arrays before
        parsing (a 4 MiB ``[{},{},…]`` took ~150-200 MB). Counts ``{`` and ``[`` bytes: a bound, not
        a parse."""
        if raw.count(b"{") + raw.count(b"[") > RECORD_MAX_CONTAINERS:
            raise DomainError(
                code="too_large",
                detail=f"line {self._line}: the record holds more than "
                f"{RECORD_MAX_CONTAINERS:,} JSON objects and arrays",
                limit=RECORD_MAX_CONTAINERS,
                record=self._line,
            )

    def _too_long(self) -> DomainError:
        limit = self.max_record_bytes
        return DomainError(
            code="too_large",
            detail=f"line {self._line}: the record is over the limit of {limit:,} bytes "
            f"(ASSAY INGEST_MAX_RECORD_BYTES)",
            limit=limit,
            record=self._line,
        )

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


@gc_paused_call
def source_open(
    *, fmt: str, stream: ByteStream, max_bytes: int, max_record_bytes: int
) -> IngestSource:
    """Start reading a ``json`` or ``ndjson`` body and read its header, the collector paused.
    Raises ``DomainError`` (bad JSON, no header; "too_large" over a limit)."""
    cls = JsonSource if fmt == "json" else NdjsonSource
    return cls(stream, max_bytes=max_bytes, max_record_bytes=max_record_bytes)
