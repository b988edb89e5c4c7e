"""Reading judge replies: a verdict or a typed parse error, per ``params["reply_format"]``.

- ``"json"`` (default): the whole reply, stripped, is one strict JSON object (no fences,
  prose, NaN/Infinity, or duplicate key: ``{"verdict":"FAIL","verdict":"PASS"}`` is
  ``unparseable``) valid under the output schema (JSON Schema 2020-12). A ``verdict``
  string equal to an ``enum`` word but for case is that word; anything else (``"passable"``,
  ``" PASS"``) is ``invalid_verdict``. An id outside its ``enum`` is ``unknown_id``; any
  other violation is ``unparseable``.
- ``"line"``: the line grammar::

      reply   := any text whose LAST line starting with "verdict" (case-insensitive,
                 after normalisation) is a verdict line
      verdict := "VERDICT" ":" space* ("PASS" | "FAIL") [.!]* space*   (case-insensitive)

  Normalisation first: zero-width characters (U+200B, U+200C, U+200D, U+2060, U+FEFF)
  removed, then NFKC. A malformed last verdict line (``VERDICT: FAL``) is ``unparseable``,
  with no fallback to an earlier line; ``"VERDICT:\u200bPASS"`` and ``"VERDICT: PASS."``
  are PASS.

Every failure keeps the raw reply verbatim. Unstorable text a JSON reply spells as an escape
(``"\u0000"``, ``"\ud800"``) becomes U+FFFD (``Parsed.replaced`` counts it; ``core.text``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from core.strict_json import no_duplicate_keys
from core.text import unstorable_replace

ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))
_VERDICT_LINE = re.compile(r"^\s*verdict\b", re.IGNORECASE)
_VERDICT_GRAMMAR = re.compile(r"^\s*verdict\s*:\s*(pass|fail)[.!]*\s*$", re.IGNORECASE)

# The reasons an errored judge grade can carry (client and parser together).
ERROR_REASONS = (
    "http_error",
    "timeout",
    "rate_limited",
    "server_error",
    "refusal",
    "empty",
    "unparseable",
    "invalid_verdict",
    "rejected_parameter",
    "nonce_leak",
    "unknown_id",
    "bad_template",  # the version's stored template is refused (judges.grading.template_refusal)
)


@dataclass(frozen=True)
class ParseError:
    """``reason`` one of ``ERROR_REASONS``, ``message`` for people, ``raw`` the reply verbatim."""

    reason: str
    message: str
    raw: str


@dataclass(frozen=True)
class Parsed:
    """``data``: the JSON object (the line form gives ``{"verdict": "PASS"|"FAIL"}``)."""

    data: dict[str, Any] = field(default_factory=dict)
    replaced: int = 0  # characters of ``data`` replaced with U+FFFD (``core.text``)


def normalise(text: str) -> str:
    """Zero-width characters removed, then NFKC (the line grammar's normalisation)."""
    return unicodedata.normalize("NFKC", text.translate(ZERO_WIDTH))


def parse_verdict_line(raw: str) -> Parsed | ParseError:
    """Read the line grammar (module docstring); ``{"verdict": "PASS"|"FAIL"}`` upper-case."""
    lines = [line for line in normalise(raw).splitlines() if _VERDICT_LINE.match(line)]
    if not lines:
        return ParseError("unparseable", "no line starting with 'VERDICT'", raw)
    match = _VERDICT_GRAMMAR.match(lines[-1])
    if not match:
        return ParseError(
            "unparseable", f"the last verdict line is malformed: {lines[-1].strip()[:200]!r}", raw
        )
    return Parsed({"verdict": match.group(1).upper()})


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def _enum_reason(error: jsonschema.ValidationError) -> str:
    path = [p for p in error.absolute_path if isinstance(p, str)]
    last = path[-1] if path else ""
    if error.validator == "enum" and last == "verdict":
        return "invalid_verdict"
    if error.validator == "enum" and (last.endswith("id") or last.endswith("ids")):
        return "unknown_id"
    return "unparseable"


def _verdict_words(data: Any, schema: Any) -> Any:
    """``data`` with every string under an ``enum``-schema ``verdict`` property replaced by the
    enum word it equals ignoring case (an exact match wins), following ``properties`` and
    ``items``."""
    if not isinstance(schema, dict):
        return data
    if isinstance(data, dict) and isinstance(schema.get("properties"), dict):
        out = dict(data)
        for name, sub in schema["properties"].items():
            if name not in out:
                continue
            value = out[name]
            enum = sub.get("enum") if isinstance(sub, dict) else None
            if name == "verdict" and isinstance(value, str) and isinstance(enum, list):
                words = [w for w in enum if isinstance(w, str)]
                if value not in words:
                    folded = [w for w in words if w.casefold() == value.casefold()]
                    if len(folded) == 1:
                        out[name] = folded[0]
            else:
                out[name] = _verdict_words(value, sub)
        return out
    if isinstance(data, list) and isinstance(schema.get("items"), dict):
        return [_verdict_words(item, schema["items"]) for item in data]
    return data


def parse_json_reply(raw: str, *, schema: dict) -> Parsed | ParseError:
    """Strict JSON parse, verdict words read ignoring case, then validation under ``schema``.
    Errors: ``unparseable``, ``invalid_verdict``, ``unknown_id``; the first in a stable order
    decides, an enum error preferred."""
    text = raw.strip()
    if not text:
        return ParseError("empty", "the reply is empty", raw)
    try:
        data = json.loads(
            text, parse_constant=_reject_constant, object_pairs_hook=no_duplicate_keys
        )
    except (ValueError, RecursionError) as exc:
        return ParseError("unparseable", f"not JSON: {exc}", raw)
    if not isinstance(data, dict):
        return ParseError("unparseable", f"expected a JSON object, got {type(data).__name__}", raw)
    data, replaced = unstorable_replace(data)
    data = _verdict_words(data, schema)
    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(data),
        key=lambda e: (e.validator != "enum", list(map(str, e.absolute_path))),
    )
    if errors:
        first = errors[0]
        where = "$" + "".join(
            f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.absolute_path
        )
        message, _ = unstorable_replace(f"{where}: {first.message[:300]}")
        return ParseError(_enum_reason(first), message, raw)
    return Parsed(data, replaced=replaced)


def reply_parse(
    raw: str, *, reply_format: str, schema: dict, nonce: str | None = None
) -> Parsed | ParseError:
    """A judge version's parser: a reply containing the fence nonce is ``nonce_leak`` (the judge
    echoed fenced material, or it steered the judge), whatever else it says; then the line or
    JSON form."""
    if nonce and nonce in raw:
        return ParseError("nonce_leak", "the reply contains the prompt's fence nonce", raw)
    if reply_format == "line":
        return parse_verdict_line(raw)
    return parse_json_reply(raw, schema=schema)
