"""Bounds of numbers and sizes accepted from outside, refused naming record and field
(docs/ingest.md, docs/limits.md): counts to ``INT_MAX``; ``latency_ms`` to one day;
``cost_usd`` below ``COST_USD_LIMIT`` to 1e-12 (a positive cost stored as 0 is refused);
scores in [0, 1]; seeds to ``SEED_MAX`` (bigint); ``BODY_MAX_BYTES``, ``TEXT_MAX_CHARS``."""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal

from core.decimals import decimal_plain
from core.errors import value_shown

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
SEED_MAX = 2**63 - 1
LATENCY_MS_MAX = 86_400_000
COST_USD_LIMIT = Decimal(10**6)

# How a cost is stored: ``numeric(COST_USD_MAX_DIGITS, COST_USD_DECIMAL_PLACES)`` (a trial's,
# a judge call's) and written out (API, CSV/Parquet exports). Every cost Assay computes is a
# whole number of 1e-12 USD (a price per 1M tokens has at most 6 decimals,
# ``providers.models.ModelPrice``; token counts are whole), so it is stored exactly and a tiny
# known cost never becomes 0 (3 tokens at $0.001 per 1M tokens: 3e-9 USD).
COST_USD_DECIMAL_PLACES = 12
COST_USD_MAX_DIGITS = 20
COST_USD_QUANTUM = Decimal(1).scaleb(-COST_USD_DECIMAL_PLACES)


def latency_problem(value: float) -> str | None:
    """None when ``value`` is in [0, LATENCY_MS_MAX] ms, else the message."""
    if math.isfinite(value) and 0 <= value <= LATENCY_MS_MAX:
        return None
    return f"expected milliseconds from 0 to {LATENCY_MS_MAX:,} (one day), got {value:g}"


def count_problem(value: int, *, minimum: int = 0) -> str | None:
    """None when ``value`` (an int) is in [minimum, INT_MAX], else the message to show."""
    if minimum <= value <= INT_MAX:
        return None
    return f"expected a whole number from {minimum} to {INT_MAX:,}, got {int_text(value)}"


def cost_problem(value: Decimal) -> str | None:
    """None when ``value`` is a finite USD amount in [0, COST_USD_LIMIT) that is 0 or stays
    above 0 when stored (rounded half up to ``COST_USD_QUANTUM``), else the message, amounts
    in plain decimals (``core.decimals.decimal_plain``)."""
    if not (value.is_finite() and 0 <= value < COST_USD_LIMIT):
        shown = decimal_plain(value) if value.is_finite() else str(value)
        return f"expected USD from 0 to below {COST_USD_LIMIT:,}, got {shown}"
    if 0 < value < COST_USD_QUANTUM / 2:
        return (
            f"a known cost of {decimal_plain(value)} USD would be stored as 0 (which means "
            f"free): costs are stored to {decimal_plain(COST_USD_QUANTUM)} USD; give 0 or "
            "leave the cost empty (unknown)"
        )
    return None


def seed_problem(value: object) -> str | None:
    """None when ``value`` is an int (not a bool) from 0 to ``SEED_MAX``, else the message."""
    if type(value) is int and 0 <= value <= SEED_MAX:
        return None
    if value is None:
        return f"required: a whole number from 0 to {SEED_MAX:,} (the same seed, the same draws)"
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected a whole number from 0 to {SEED_MAX:,}, got {value_shown(value)}"
    return f"expected a whole number from 0 to {SEED_MAX:,}, got {int_text(value)}"


# --- numbers in messages ---------------------------------------------------------------------

_SHOWN_DIGITS = 30  # a whole number longer than this is shown by its size, not its digits


def int_text(value: int) -> str:
    """``value``'s digits, or "a number of about N digits" past 30 digits."""
    if abs(value).bit_length() <= 99:  # at most 30 digits
        return str(value)
    return f"a number of about {int(abs(value).bit_length() * 0.30103) + 1:,} digits"


_DIGITS_ADVICE = re.compile(
    r"Exceeds the limit \((\d+) digits\) for integer string conversion"
    r"(?:: value has (\d+) digits)?; use sys\.set_int_max_str_digits\(\) to increase the limit"
)


def int_digits_plain(message: str) -> str:
    """``message`` with Python's integer-size advice replaced by "a number with more than 4300
    digits is refused"; other text kept."""
    return _DIGITS_ADVICE.sub(
        lambda m: f"a number with more than {m.group(1)} digits is refused", message
    )


# --- request bodies --------------------------------------------------------------------------

KIB = 1024
MIB = 1024 * KIB

# The largest JSON request body each kind of endpoint reads, in bytes; a body over it is a
# 413 before one byte is read (``Content-Length``: ``core.api.limits.BodyLimitMiddleware``),
# and the read itself is capped (``core.api.parsers.StrictJSONParser``,
# ``interop.api.ingest``). A view picks its row with
# ``body_limit = "labels"``; every other view reads ``default``. Why these sizes: parsed
# JSON takes up to ~46 bytes of memory per body byte (``[{},{},...]``: a dict and its pair
# list for every 3 bytes), so 1 MiB parses into at most ~48 MB (``REQUEST_PEAK_MAX_BYTES``).
# Larger data has its own streamed paths: NDJSON ingest (``ASSAY["INGEST_MAX_BYTES"]``,
# 256 MiB, memory bounded by one record) and file imports (multipart, spooled to disk).
BODY_MAX_BYTES = {
    "ingest_json": 1 * MIB,  # POST /api/ingest as one JSON document (NDJSON: streamed)
    "gate": 1 * MIB,  # POST /api/gate (run files inline)
    "run_start": 256 * KIB,  # POST /api/runs/start
    "labels": 256 * KIB,  # POST /api/labels (a critique: 20,000 characters)
    "default": 1 * MIB,  # every other JSON body
    # A form post (DATA_UPLOAD_MAX_MEMORY_SIZE): urlencoded, parsed whole by Django at up to
    # 75 bytes of memory per body byte (a body of percent escapes: urllib's unquote), so
    # 1 MiB parses in at most ~80 MB; a 200,000-character case field of plain text fits.
    "form": 1 * MIB,
}
# What a test measures around a request whose body is at its limit (tracemalloc peak).
REQUEST_PEAK_MAX_BYTES = 64 * MIB


def body_limit_bytes(name: str | None) -> int:
    """The body limit (bytes) of the endpoint row ``name`` (``default`` when None)."""
    return BODY_MAX_BYTES[name or "default"]


def body_too_large_text(size: int | None, limit: int, *, hint: str = "") -> str:
    """The 413's sentence, then ``hint``; ``size`` None: the read went past the limit."""
    shown = "over" if size is None else f"{size:,} bytes, over"
    return f"request body: {shown} this endpoint's limit of {limit:,} bytes{hint}"


# --- text fields -----------------------------------------------------------------------------

# The longest text each field may hold, in characters (a JSON field: its compact JSON text,
# ``ensure_ascii=False``), on every path that writes it. Checked by ``text_problem`` /
# ``json_size_problem`` in the service each path calls.
TEXT_MAX_CHARS = {
    "suite.description": 20_000,
    "case.field": 200_000,  # input, expected, context, goal_state: evals.cases
    "prompt_template": 100_000,  # a judge version's and an openai target's
    "judge.params": 400_000,  # few-shot examples included (20 x 3 x 4,000 characters)
    "judge.output_schema": 100_000,
    "guidelines": 20_000,  # a calibration set's guidelines for reviewers
    "critique": 20_000,  # a label's, and each dimension's of a review
    "note": 10_000,  # a note in a calibration item's thread (labeling.notes)
    "form.json": 200_000,  # a JSON field typed in a form (target settings, grader set)
}
# A config file for ``manage.py apply_config`` (TOML, parsed whole): larger suites keep their
# cases in a ``cases_file`` (JSONL, read a line at a time).
CONFIG_FILE_MAX_BYTES = 1 * MIB
JUDGE_PARAMS_MAX_KEYS = 100  # top-level keys of a judge version's params


def text_problem(value: str, name: str) -> str | None:
    """None when ``value`` has at most ``TEXT_MAX_CHARS[name]`` characters, else the message."""
    limit = TEXT_MAX_CHARS[name]
    if len(value) <= limit:
        return None
    return f"{len(value):,} characters; at most {limit:,}"


def json_size_problem(value: object, name: str) -> str | None:
    """``text_problem`` for parsed JSON, measured as compact JSON; stops encoding past the limit."""
    limit = TEXT_MAX_CHARS[name]
    size = 0
    for chunk in _COMPACT.iterencode(value):
        size += len(chunk)
        if size > limit:
            return f"more than {limit:,} characters as JSON"
    return None


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=repr)
