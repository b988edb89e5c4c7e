"""Exports of a run, a comparison and labels as CSV (RFC 4180) or Parquet: an ``ExportTable``
built in a fixed number of queries, then written.

- CSV (``table_csv``): UTF-8, no BOM, CRLF, ``csv.QUOTE_MINIMAL``. Null is the empty cell,
  never ``0`` or ``NaN``; booleans ``true``/``false``; datetimes ISO 8601 with the offset of
  zone ``tz`` (default UTC); tags joined with ``,``, or a JSON array when a tag would not
  split back (``tags_cell``); a non-string JSON ``input``/``expected`` as compact JSON; text
  cells through ``formula_neutralise``.
- Parquet (``table_parquet``): typed pyarrow columns (``int64``, ``float64``,
  ``decimal128(14, 8)`` for USD, ``bool``, ``timestamp[us, tz]``, ``list<string>``).

The run CSV's columns are the CSV importer's fields, so an export imports back to the same
cases and trial values (docs/interop.md, "CSV exports and the round trip").
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from django.db.models import Prefetch, QuerySet
from django.http import HttpResponse
from rest_framework import serializers

from core.api.downloads import attachment, download_format
from core.bounds import COST_USD_DECIMAL_PLACES, COST_USD_MAX_DIGITS
from core.decimals import decimal_plain
from core.errors import DomainError, value_shown
from core.zones import zone_parse
from evals.blindness import NOT_BLIND, blind_for, grades_visible_to, labels_visible_to
from evals.grading.contract.decisions import run_decisions
from evals.models import Grade, Run, Trial
from judges.models import JudgeRun
from labeling.models import Label, PreferenceLabel
from providers.usage import EXTRA_TOKEN_FIELDS as EXTRA_TOKEN_CLASSES

FORMATS = ("csv", "parquet")
CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}
USD = pa.decimal128(COST_USD_MAX_DIGITS, COST_USD_DECIMAL_PLACES)  # as stored (core.bounds)
GRADE_FIELDS = ("passed", "status", "score", "reason")
# An agent run's columns (after created_at), as JSON text; read back by the run-export import.
AGENT_COLUMNS = ("goal_state", "final_state", "trajectory")


@dataclass(frozen=True)
class ExportTable:
    """Columns ``[(name, pyarrow type)]`` and rows (lists of Python values, None = null)."""

    columns: list[tuple[str, pa.DataType]]
    rows: list[list[Any]]


def zone_get(*, name: str | None) -> tzinfo:
    """The IANA zone ``name`` (``"Asia/Shanghai"``); UTC when empty. Raises ``DomainError``."""
    if not name or name.upper() == "UTC":
        return UTC
    zone = zone_parse(name)
    if zone is None:
        raise DomainError(f"unknown time zone {name[:80]!r}", field="tz")
    return zone


def _json_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _json_value_text(value: Any) -> str | None:
    """Any JSON value (a string too) as compact JSON text; None stays null."""
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _grader_keys(run: Run, trials: list[Trial]) -> list[str]:
    keys = list(run.grader_set.keys)
    extra = sorted({g.grader for t in trials for g in t.grades.all()} - set(keys))
    return keys + extra


def run_table(*, run: Run, zone: tzinfo = UTC, viewer=None) -> ExportTable:
    """One row per trial of ``run`` by case key and attempt: suite, run, case_id, content_hash,
    input, expected, context, tags, attempt, status, output, error, latency_ms (ms), the five
    token classes (input, output, cache_write, cache_read, reasoning; null when unknown),
    cost_usd (USD, null when unknown), created_at (in ``zone``); ``decision`` for a contract
    grader (null for a retried attempt); ``AGENT_COLUMNS`` for agent runs (compact JSON); then
    ``<grader>.passed|status|score|reason`` per grader. With ``viewer`` a blind trial's grades
    and decision are empty (``evals.blindness``); None (command line) exports all. Two queries,
    +1 with a viewer, +3 with a contract grader."""
    grade_qs: QuerySet[Grade] = Grade.objects.order_by("id")
    blind = NOT_BLIND
    if viewer is not None:
        blind = blind_for(viewer)
        grade_qs = grades_visible_to(grade_qs, viewer, blind=blind)
    grades = Prefetch("grades", queryset=grade_qs)
    trials = list(
        Trial.objects.filter(run=run)
        .select_related("case")
        .prefetch_related(grades)
        .order_by("case__key", "attempt", "id")
    )
    keys = _grader_keys(run, trials)
    columns: list[tuple[str, pa.DataType]] = [
        ("suite", pa.string()),
        ("run", pa.string()),
        ("case_id", pa.string()),
        ("content_hash", pa.string()),
        ("input", pa.string()),
        ("expected", pa.string()),
        ("context", pa.string()),
        ("tags", pa.list_(pa.string())),
        ("attempt", pa.int64()),
        ("status", pa.string()),
        ("output", pa.string()),
        ("error", pa.string()),
        ("latency_ms", pa.float64()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        *((name, pa.int64()) for name in EXTRA_TOKEN_CLASSES),
        ("cost_usd", USD),
        ("created_at", pa.timestamp("us", tz=str(zone))),
    ]
    agent = any(
        t.trajectory is not None or t.final_state is not None or t.case.goal_state is not None
        for t in trials
    )
    if agent:
        columns += [(name, pa.string()) for name in AGENT_COLUMNS]
    decisions = run_decisions(run=run)
    if decisions.graded:
        columns.append(("decision", pa.string()))
    for key in keys:
        columns += [
            (f"{key}.passed", pa.bool_()),
            (f"{key}.status", pa.string()),
            (f"{key}.score", pa.float64()),
            (f"{key}.reason", pa.string()),
        ]
    rows = []
    for t in trials:
        by_grader = {g.grader: g for g in t.grades.all()}
        row = [
            run.suite.name,
            run.name,
            t.case.key,
            t.case.content_hash,
            _json_text(t.case.input),
            _json_text(t.case.expected),
            _json_text(t.case.context or []),
            list(t.case.tags),
            t.attempt,
            t.status,
            t.output,
            t.error_message,
            t.latency_ms,
            t.input_tokens,
            t.output_tokens,
            *(getattr(t, name) for name in EXTRA_TOKEN_CLASSES),
            t.cost_usd,
            t.created_at.astimezone(zone),
        ]
        if agent:
            row += [
                _json_value_text(t.case.goal_state),
                _json_value_text(t.final_state),
                _json_value_text(t.trajectory),
            ]
        if decisions.graded:
            decision = None if blind.holds(t.case) else decisions.trials.get(t.id)
            row.append(decision.decision if decision else None)
        for key in keys:
            g = by_grader.get(key)
            row += (
                [None, None, None, None] if g is None else [g.passed, g.status, g.score, g.reason]
            )
        rows.append(row)
    return ExportTable(columns=columns, rows=rows)


def labels_table(*, run: Run, zone: tzinfo = UTC, viewer=None) -> ExportTable:
    """One row per label on ``run``'s trials: trial, case_id, attempt, reviewer, verdict,
    critique, source, created_at (in ``zone``). With ``viewer`` only what they may read
    (``evals.blindness.labels_visible_to``). One query."""

    labels = Label.objects.filter(trial__run=run)
    if viewer is not None:
        labels = labels_visible_to(labels, viewer)
    labels = labels.select_related("trial__case", "reviewer").order_by(
        "trial__case__key", "trial__attempt", "created_at", "id"
    )
    columns = [
        ("trial", pa.string()),
        ("case_id", pa.string()),
        ("attempt", pa.int64()),
        ("reviewer", pa.string()),
        ("verdict", pa.string()),
        ("critique", pa.string()),
        ("source", pa.string()),
        ("created_at", pa.timestamp("us", tz=str(zone))),
    ]
    rows = [
        [
            str(lb.trial.uuid),
            lb.trial.case.key,
            lb.trial.attempt,
            lb.reviewer.username if lb.reviewer else lb.reviewer_name,
            lb.verdict,
            lb.critique,
            lb.source,
            lb.created_at.astimezone(zone),
        ]
        for lb in labels
    ]
    return ExportTable(columns=columns, rows=rows)


def preferences_table(*, judge_run: JudgeRun, zone: tzinfo = UTC, viewer=None) -> ExportTable:
    """One row per human preference on a pairwise judge run's pairs: pair, case_id, reviewer,
    preferred (A = base, B, tie), preferred_run, shown_first (null when imported), chose_shown
    (as on screen), critique, source, created_at. ``viewer`` as in ``labels_table``. Raises
    DomainError (field ``judge_run``) for a judge run that is not pairwise. One query."""
    if not judge_run.is_pairwise:
        raise DomainError("only a pairwise judge run has preference labels", field="judge_run")
    labels = PreferenceLabel.objects.filter(pair_id__in=list(judge_run.trial_ids))
    if viewer is not None:
        labels = labels_visible_to(labels, viewer)
    labels = labels.select_related("pair__case", "reviewer").order_by(
        "pair__case__key", "pair_id", "created_at", "id"
    )
    columns = [
        ("pair", pa.string()),
        ("case_id", pa.string()),
        ("reviewer", pa.string()),
        ("preferred", pa.string()),
        ("preferred_run", pa.string()),
        ("shown_first", pa.string()),
        ("chose_shown", pa.string()),
        ("critique", pa.string()),
        ("source", pa.string()),
        ("created_at", pa.timestamp("us", tz=str(zone))),
    ]
    run_of = {"A": "base", "B": "head", "tie": "tie"}
    swap = {"A": "B", "B": "A", "tie": "tie"}
    rows = [
        [
            str(lb.pair.uuid),
            lb.pair.case.key,
            lb.reviewer.username if lb.reviewer else lb.reviewer_name,
            lb.preferred,
            run_of.get(lb.preferred),
            None if lb.shown_swapped is None else ("head" if lb.shown_swapped else "base"),
            None
            if lb.shown_swapped is None
            else (swap[lb.preferred] if lb.shown_swapped else lb.preferred),
            lb.critique,
            lb.source,
            lb.created_at.astimezone(zone),
        ]
        for lb in labels
    ]
    return ExportTable(columns=columns, rows=rows)


def comparison_table(*, base: Run, head: Run, alpha: float = 0.05) -> ExportTable:
    """``comparison_get(base=, head=)`` as rows: one per shared case (x/N, rates in [0, 1],
    delta = head − base, change class, errored per side), then ``added``, ``removed``,
    ``changed`` cases; for agent runs one ``agent_2x2`` row per outcome × trajectory cell
    (``evals.comparison.agents``). The queries of ``comparison_get``, whatever the rows."""

    # Imported here: the comparison pulls scipy, and this module is on every worker's import
    # path (interop.tasks -> import_jobs -> importers), which never needs it.
    from evals.comparison.agents import agent_moves_get  # noqa: PLC0415 - see above
    from evals.comparison.selectors import comparison_get  # noqa: PLC0415 - see above

    cmp = comparison_get(base=base, head=head, alpha=alpha)
    columns = [
        ("section", pa.string()),
        ("case_id", pa.string()),
        ("content_hash", pa.string()),
        ("tags", pa.list_(pa.string())),
        ("base_passed", pa.int64()),
        ("base_graded", pa.int64()),
        ("head_passed", pa.int64()),
        ("head_graded", pa.int64()),
        ("base_rate", pa.float64()),
        ("head_rate", pa.float64()),
        ("delta", pa.float64()),
        ("change", pa.string()),
        ("base_errored", pa.int64()),
        ("head_errored", pa.int64()),
    ]
    rows: list[list[Any]] = [
        [
            "shared",
            c.key,
            c.content_hash,
            list(c.tags),
            c.base_passed,
            c.base_graded,
            c.head_passed,
            c.head_graded,
            c.base_rate,
            c.head_rate,
            c.delta,
            c.change,
            c.base_errored,
            c.head_errored,
        ]
        for c in cmp.cases
    ]
    for section, refs in (("added", cmp.added), ("removed", cmp.removed), ("changed", cmp.changed)):
        rows += [[section, r.key, r.content_hash, list(r.tags)] + [None] * 10 for r in refs]
    moves = agent_moves_get(base=base, head=head)
    for m in moves.cells if moves is not None else []:
        rows.append(
            ["agent_2x2", m.cell, None, [], m.base, m.base_in_table, m.head, m.head_in_table]
            + [m.base_share, m.head_share, m.share_change, f"{m.change:+d} trials", None, None]
        )
    return ExportTable(columns=columns, rows=rows)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float):
        return repr(value)  # finite by construction: the models never store NaN
    if isinstance(value, list):
        return tags_cell(value)
    if isinstance(value, Decimal):
        return decimal_plain(value)  # a zero cost is 0.00000000, never 0E-8
    return str(value)


def tags_cell(tags: list[str]) -> str:
    """``a,b`` when splitting on commas gives the tags back exactly, else the compact JSON array."""
    if all(t and "," not in t and t == t.strip() for t in tags) and not (
        tags and tags[0].startswith("[")
    ):
        return ",".join(tags)
    return json.dumps(tags, ensure_ascii=False, separators=(",", ":"))


# OWASP "CSV injection": a spreadsheet runs a cell starting with one of these as a formula
# (tab and carriage return too). The quote itself is escaped as well, so that reading an
# export back (``formula_restore``) is exact.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "'")


def formula_neutralise(text: str) -> str:
    """A text cell no spreadsheet runs: one starting with ``= + - @``, tab, CR or ``'`` gets a
    leading ``'`` (OWASP "CSV injection"); ``formula_restore`` undoes it."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def formula_restore(text: str) -> str:
    """One leading ``'`` removed when the rest starts like a formula or with ``'``."""
    if text.startswith("'") and text[1:].startswith(FORMULA_STARTS):
        return text[1:]
    return text


def _is_text(typ: pa.DataType) -> bool:
    return pa.types.is_string(typ) or (pa.types.is_list(typ) and pa.types.is_string(typ.value_type))


def table_csv(table: ExportTable) -> bytes:
    """``table`` as RFC 4180 CSV bytes (module docstring); text cells and header neutralised,
    numbers never."""
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow([formula_neutralise(name) for name, _ in table.columns])
    text = [_is_text(typ) for _, typ in table.columns]
    for row in table.rows:
        writer.writerow(
            [
                formula_neutralise(_cell(v)) if is_text else _cell(v)
                for v, is_text in zip(row, text, strict=True)
            ]
        )
    return out.getvalue().encode("utf-8")


def table_parquet(table: ExportTable) -> bytes:
    """``table`` as Parquet bytes (pyarrow, one typed column per export column)."""
    arrays = [
        pa.array([row[i] for row in table.rows], type=typ)
        for i, (_, typ) in enumerate(table.columns)
    ]
    names = [name for name, _ in table.columns]
    out = io.BytesIO()
    pq.write_table(pa.Table.from_arrays(arrays, names=names), out)
    return out.getvalue()


WRITERS: dict[str, Callable[[ExportTable], bytes]] = {"csv": table_csv, "parquet": table_parquet}


def table_write(*, table: ExportTable, fmt: str) -> bytes:
    """``table`` in format ``fmt`` (``csv`` or ``parquet``). Raises ``DomainError``."""
    if fmt not in WRITERS:
        raise DomainError(
            f"expected one of {', '.join(FORMATS)}, got {value_shown(fmt)}", field="format"
        )
    return WRITERS[fmt](table)


def download_zone(request):
    """The ``?tz=`` zone (``evals.zone_get``, default UTC); a 400 naming ``tz``."""
    try:
        return zone_get(name=request.query_params.get("tz"))
    except DomainError as exc:
        raise serializers.ValidationError({"tz": [str(exc)]}) from exc


def table_download(request, build, stem: str) -> HttpResponse:
    """``build(zone)`` as ``<stem>.csv`` or ``<stem>.parquet`` by ``?format=``, times in
    ``?tz=``; 400s name the option."""
    fmt = download_format(request, FORMATS)
    body = table_write(table=build(download_zone(request)), fmt=fmt)
    return attachment(body, CONTENT_TYPES[fmt], f"{stem}.{fmt}")
