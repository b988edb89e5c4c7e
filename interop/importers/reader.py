"""One reader for every text import (command, upload, API): bytes in, checked text out.

1. A leading UTF-8 BOM is stripped.
2. Bytes are decoded strictly as UTF-8; invalid bytes raise ``DomainError`` naming the line
   and the byte offset in the file.
3. CRLF and a lone CR become LF, inside quoted CSV fields too.
4. The file is read line by line: memory is bounded by the longest line.

CSV goes through the ``csv`` module (RFC 4180); JSONL through ``json.loads`` per line, bare
``NaN``/``Infinity`` turned into ``NON_FINITE``, which only score fields accept.

Limits of every import path: JSON nesting at most ``JSON_MAX_DEPTH`` (64), deeper an error
naming the line (never a ``RecursionError``); times from 1900 to 2999 in UTC
(``time_check``), never an ``OverflowError`` later.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import BinaryIO

from core.errors import DomainError
from core.strict_json import json_loads_line
from evals.cases import CaseSpec, size_problem

BOM = b"\xef\xbb\xbf"
TIME_MIN = datetime(1900, 1, 1, tzinfo=UTC)
TIME_MAX = datetime(2999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
TIME_RANGE = "from 1900-01-01T00:00:00Z to 2999-12-31T23:59:59Z (in UTC)"


def record_error(
    where: str, field: str, msg: str, *, record: int | None = None, code: str = "invalid"
) -> DomainError:
    """The error for one bad field: ``"<where>: field <field>: <msg>"`` (``where`` e.g. ``line
    3``); ``record`` is the caller's row index (the ingest API answers with it); ``code`` e.g.
    "too_large"."""
    return DomainError(
        msg, field=field, record=record, detail=f"{where}: field {field}: {msg}", code=code
    )


def case_size_check(case: CaseSpec, *, where: str, record: int | None = None) -> CaseSpec:
    """Refuse a case over ``evals.cases.size_problem``'s limits, naming the record and field (code
    "too_large"). Returns ``case``."""
    problem = size_problem(case)
    if problem is not None:
        name, message = problem
        raise record_error(where, name, message, record=record, code="too_large")
    return case


def text_lines(stream: BinaryIO | Iterable[bytes]) -> Iterator[tuple[int, str]]:
    """Yield ``(physical_line_number, text)``, 1-based, ``text`` ending in ``"\n"`` but maybe the
    last. Raises ``DomainError`` on invalid UTF-8: ``"line 3 (byte offset 57): invalid UTF-8
    ..."`` (offset from the start of the file, BOM included)."""
    line_no = 0
    offset = 0
    for raw in stream:
        if line_no == 0 and offset == 0 and raw.startswith(BOM):
            offset = len(BOM)
            raw = raw[len(BOM) :]
        try:
            text = raw.decode("utf-8", errors="strict")
        except UnicodeDecodeError as exc:
            raise DomainError(
                f"line {line_no + 1} (byte offset {offset + exc.start}): invalid UTF-8 "
                f"({exc.reason}); save the file as UTF-8"
            ) from None
        offset += len(raw)
        if text and text.find("\n") == len(text) - 1 and "\r" not in text:
            line_no += 1  # one line ending in LF, no CR (most lines): what the rules below give
            yield line_no, text
            continue
        # Binary iteration splits on LF only, so CRLF stays within one piece; a lone CR
        # (old Mac line ending) becomes a line break of its own.
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        pieces = text.split("\n")
        for i, piece in enumerate(pieces):
            if i < len(pieces) - 1:
                line_no += 1
                yield line_no, piece + "\n"
            elif piece:
                line_no += 1
                yield line_no, piece


@dataclass(frozen=True)
class CsvRow:
    """``row`` (1-based, after the header), ``line`` (where the row starts), ``values`` (column ->
    string)."""

    row: int
    line: int
    values: dict[str, str]

    @property
    def where(self) -> str:
        return f"row {self.row} (line {self.line})"


# The largest CSV field accepted, in characters (a whole model output fits; 256 MiB).
CSV_FIELD_LIMIT = 256 * 1024 * 1024


def csv_rows(stream: BinaryIO | Iterable[bytes]) -> tuple[list[str], Iterator[CsvRow]]:
    """Read a CSV file with a header row: ``(header, rows)``; blank lines skipped, fields up to
    ``CSV_FIELD_LIMIT`` characters (the csv module's default is 131,072). Raises ``DomainError``
    naming the row: empty file, blank or duplicate header name, wrong cell count, CSV syntax."""
    csv.field_size_limit(CSV_FIELD_LIMIT)
    state = {"line": 0}

    def lines() -> Iterator[str]:
        for line_no, text in text_lines(stream):
            state["line"] = line_no
            yield text

    reader = csv.reader(lines(), strict=True)
    try:
        header = next(reader)
    except StopIteration:
        raise DomainError("the CSV file is empty (no header row)") from None
    except csv.Error as exc:
        raise DomainError(f"line 1: CSV header: {exc}") from None
    header = [h.strip() for h in header]
    seen: set[str] = set()
    for i, name in enumerate(header, start=1):
        if not name:
            raise DomainError(f"line 1: CSV header: column {i} has no name")
        if name in seen:
            raise DomainError(f"line 1: CSV header: column name {name!r} appears twice")
        seen.add(name)

    def rows() -> Iterator[CsvRow]:
        row_no = 0
        while True:
            start = state["line"] + 1
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise DomainError(f"row {row_no + 1} (line {start}): CSV: {exc}") from None
            if not cells or cells == [""]:
                continue
            row_no += 1
            if len(cells) != len(header):
                raise DomainError(
                    f"row {row_no} (line {start}): expected {len(header)} cells as in the "
                    f"header, got {len(cells)}"
                )
            yield CsvRow(row=row_no, line=start, values=dict(zip(header, cells, strict=True)))

    return header, rows()


def time_check(value: datetime) -> datetime | None:
    """``value`` (aware) in UTC when within TIME_MIN..TIME_MAX, else None (also when converting
    overflows, e.g. 9999-12-31T23:59:59-05:00). Callers name the field."""
    try:
        utc = value.astimezone(UTC)
    except (OverflowError, ValueError):
        return None
    return utc if TIME_MIN <= utc <= TIME_MAX else None


def jsonl_records(stream: BinaryIO | Iterable[bytes]) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` per non-blank line. Raises ``DomainError`` naming the line
    for invalid JSON or a non-object."""
    for line_no, text in text_lines(stream):
        if not text.strip():
            continue
        try:
            obj = json_loads_line(text)
        except ValueError as exc:
            raise DomainError(f"line {line_no}: invalid JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise DomainError(f"line {line_no}: expected a JSON object, got {type(obj).__name__}")
        yield line_no, obj
