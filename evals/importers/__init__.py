"""Importing results recorded elsewhere: labeled records, CSV and JSONL with a mapping.

Entry point: ``results_import``. Every text import (command, upload, API) decodes through
``reader`` (BOM stripped, strict UTF-8, line endings normalised) and runs in one
transaction: a bad row aborts everything and nothing is written.

Format detection (when ``fmt`` is None):
1. a name ending ``.csv`` -> ``csv``;
2. otherwise the first non-blank line is read: not starting with ``{`` -> ``csv``; a JSON
   object holding both ``task_type`` and ``human_label`` -> ``labeled``; else ``jsonl``.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO

from django.db import transaction

from ..models import Suite
from .context import ImportContext, ImportSummary
from .labeled import labeled_import
from .reader import ResultsImportError, csv_rows, jsonl_records, text_lines
from .tabular import mapping_parse, tabular_import

FORMATS = ("labeled", "csv", "jsonl")

__all__ = ["FORMATS", "ImportSummary", "ResultsImportError", "format_detect",
           "mapping_parse", "results_import"]


def format_detect(*, stream: BinaryIO, filename: str) -> str:
    """Guess ``labeled``, ``csv`` or ``jsonl`` (rules in the module doc); rewinds ``stream``."""
    if filename.lower().endswith(".csv"):
        return "csv"
    stream.seek(0)
    first = ""
    for _, text in text_lines(stream):
        if text.strip():
            first = text
            break
    stream.seek(0)
    if not first.lstrip().startswith("{"):
        return "csv"
    try:
        obj = json.loads(first)
    except ValueError:
        return "jsonl"  # the JSONL reader will name the line and the error
    if isinstance(obj, dict) and "task_type" in obj and "human_label" in obj:
        return "labeled"
    return "jsonl"


@transaction.atomic
def results_import(
    *, stream: BinaryIO, filename: str, suite_name: str, run_name: str,
    fmt: str | None = None, mapping: dict[str, str] | None = None,
    suite_kind: str = Suite.Kind.REGRESSION, threshold: float | None = None, user: Any = None,
) -> ImportSummary:
    """Import one file into suite ``suite_name`` (created when missing, with ``suite_kind``)
    as the new run ``run_name`` (pairwise labeled records: ``<run> / A`` and ``<run> / B``).

    ``stream``: binary and seekable; ``mapping``: field -> column for csv/jsonl;
    ``threshold``: pass threshold in [0, 1] for score-only rows. Returns the counts.
    Raises ``ResultsImportError`` naming the line/row and field; all or nothing.
    """
    suite_name, run_name = (suite_name or "").strip(), (run_name or "").strip()
    if not suite_name:
        raise ResultsImportError("suite: a suite name is required")
    if not run_name:
        raise ResultsImportError("run: a run name is required")
    if len(suite_name) > 200 or len(run_name) > 196:
        raise ResultsImportError("suite/run: name too long (suite <= 200, run <= 196 chars)")
    if suite_kind not in Suite.Kind.values:
        raise ResultsImportError(f"suite kind: expected one of {', '.join(Suite.Kind.values)}, "
                                 f"got {suite_kind!r}")
    stream.seek(0)
    fmt = fmt or format_detect(stream=stream, filename=filename)
    if fmt not in FORMATS:
        raise ResultsImportError(f"format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "labeled" and mapping:
        raise ResultsImportError("mapping: labeled records take no column mapping")
    suite, _ = Suite.objects.get_or_create(name=suite_name, defaults={"kind": suite_kind})
    summary = ImportSummary(suite=suite, format=fmt)
    ctx = ImportContext(suite=suite, run_name=run_name, filename=filename, summary=summary,
                        user=user)
    if fmt == "labeled":
        labeled_import(ctx=ctx, records=jsonl_records(stream))
    elif fmt == "csv":
        tabular_import(ctx=ctx, fmt="csv", source=csv_rows(stream), mapping=mapping or {},
                       threshold=threshold)
    else:
        tabular_import(ctx=ctx, fmt="jsonl", source=jsonl_records(stream),
                       mapping=mapping or {}, threshold=threshold)
    return summary
