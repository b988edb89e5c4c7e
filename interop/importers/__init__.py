"""Importing results recorded elsewhere: labeled records, CSV/JSONL with a mapping,
promptfoo files and Inspect AI JSON logs (docs/interop.md). Entry point ``results_import``:
decoding through ``reader`` (``harness.json_document`` for one-document formats), one
transaction per import.

Format detection (``fmt`` None):
1. a name ending ``.csv`` -> ``csv``; a zip header (Inspect's binary ``.eval``) -> ``inspect``,
   which refuses it with the converting command;
2. a first non-blank line not starting with ``{`` -> ``csv``;
3. a first line that is a JSON object: ``task_type`` and ``human_label`` -> ``labeled``; the
   promptfoo or Inspect shape -> that format; else ``jsonl``;
4. otherwise the whole file is parsed as one document and tested for those shapes; else
   ``jsonl``, whose reader names the bad line.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO

from django.db import transaction

from core.errors import DomainError, value_shown
from evals.models import Suite
from interop.importers.context import ImportContext, ImportSummary
from interop.importers.harness import json_document
from interop.importers.inspect_log import ZIP_MAGIC, inspect_import, is_inspect, refuse_binary_log
from interop.importers.labeled import labeled_import
from interop.importers.promptfoo import is_promptfoo, promptfoo_import
from interop.importers.reader import csv_rows, jsonl_records, text_lines
from interop.importers.run_export import run_export_check, run_export_graders, run_export_import
from interop.importers.tabular import mapping_parse, tabular_import

FORMATS = ("labeled", "csv", "jsonl", "promptfoo", "inspect")
DOCUMENT_FORMATS = ("promptfoo", "inspect")  # one JSON document, their own verdicts

__all__ = [
    "DOCUMENT_FORMATS",
    "FORMATS",
    "ImportSummary",
    "DomainError",
    "format_detect",
    "mapping_parse",
    "results_import",
]


def format_detect(*, stream: BinaryIO, filename: str) -> str:
    """``labeled``, ``csv``, ``jsonl``, ``promptfoo`` or ``inspect`` (module docstring); rewinds."""
    if filename.lower().endswith(".csv"):
        return "csv"
    stream.seek(0)
    if stream.read(len(ZIP_MAGIC)) == ZIP_MAGIC:
        stream.seek(0)
        return "inspect"
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
    except (ValueError, RecursionError):  # a line nested too deeply: reading names it
        obj = _document_or_none(stream)
        if is_promptfoo(obj):
            return "promptfoo"
        return "inspect" if is_inspect(obj) else "jsonl"  # else JSONL names the bad line
    if isinstance(obj, dict) and "task_type" in obj and "human_label" in obj:
        return "labeled"
    if is_promptfoo(obj):
        return "promptfoo"
    return "inspect" if is_inspect(obj) else "jsonl"


def _document_or_none(stream: BinaryIO) -> Any:
    """The whole file as one JSON document, or None when it is not one; rewinds."""
    try:
        return json_document(stream, refuse_unstorable=False)  # the import refuses it
    except DomainError:
        return None
    finally:
        stream.seek(0)


@transaction.atomic
def results_import(
    *,
    stream: BinaryIO,
    filename: str,
    suite_name: str,
    run_name: str,
    fmt: str | None = None,
    mapping: dict[str, str] | None = None,
    suite_kind: str = Suite.Kind.REGRESSION,
    threshold: float | None = None,
    user: Any = None,
) -> ImportSummary:
    """Import one binary seekable ``stream`` into suite ``suite_name`` (created with
    ``suite_kind``) as new run ``run_name`` (pairwise labeled records: ``<run> / A`` and
    ``<run> / B``). ``mapping``: field -> column (csv/jsonl); ``threshold`` in [0, 1] for
    score-only rows. Returns the counts. Raises ``DomainError`` naming the line/row and field;
    all or nothing."""
    suite_name, run_name = (suite_name or "").strip(), (run_name or "").strip()
    if not suite_name:
        raise DomainError("suite: a suite name is required")
    if not run_name:
        raise DomainError("run: a run name is required")
    if len(suite_name) > 200 or len(run_name) > 196:
        raise DomainError("suite/run: name too long (suite <= 200, run <= 196 chars)")
    if suite_kind not in Suite.Kind.values:
        raise DomainError(
            f"suite kind: expected one of {', '.join(Suite.Kind.values)}, "
            f"got {value_shown(suite_kind)}"
        )
    stream.seek(0)
    fmt = fmt or format_detect(stream=stream, filename=filename)
    if fmt not in FORMATS:
        raise DomainError(f"format: expected one of {', '.join(FORMATS)}, got {value_shown(fmt)}")
    if fmt == "labeled" and mapping:
        raise DomainError("mapping: labeled records take no column mapping")
    if fmt in DOCUMENT_FORMATS and mapping:
        raise DomainError(f"mapping: a {fmt} file takes no column mapping")
    if fmt in DOCUMENT_FORMATS and threshold is not None:
        raise DomainError(
            f"threshold: a {fmt} file carries its own verdicts; leave the threshold empty"
        )
    suite, _ = Suite.objects.get_or_create(name=suite_name, defaults={"kind": suite_kind})
    summary = ImportSummary(suite=suite, format=fmt)
    ctx = ImportContext(
        suite=suite, run_name=run_name, filename=filename, summary=summary, user=user
    )
    if fmt in DOCUMENT_FORMATS:
        stream.seek(0)
        if fmt == "inspect" and stream.read(len(ZIP_MAGIC)) == ZIP_MAGIC:
            raise refuse_binary_log()
        document = json_document(stream)
        if fmt == "promptfoo":
            promptfoo_import(ctx=ctx, document=document)
        else:
            inspect_import(ctx=ctx, document=document)
    elif fmt == "labeled":
        labeled_import(ctx=ctx, records=jsonl_records(stream))
    elif fmt == "csv":
        header, rows = csv_rows(stream)
        graders = None if mapping else run_export_graders(header)
        if not mapping:
            run_export_check(header)
        if graders is not None:
            if threshold is not None:
                raise DomainError(
                    "threshold: an Assay run export carries its own verdicts; leave the "
                    "threshold empty"
                )
            run_export_import(ctx=ctx, header=header, rows=rows, graders=graders)
        else:
            tabular_import(
                ctx=ctx,
                fmt="csv",
                source=(header, rows),
                mapping=mapping or {},
                threshold=threshold,
            )
    else:
        tabular_import(
            ctx=ctx,
            fmt="jsonl",
            source=jsonl_records(stream),
            mapping=mapping or {},
            threshold=threshold,
        )
    return summary
