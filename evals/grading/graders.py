"""Deterministic graders: the cheap rungs of the grader ladder.

A grader set is a list of ``GraderSpec`` parsed once at the edge
(``evals.grading.grader_config.parse_grader_specs``); every config error is a ``DomainError``
naming ``graders[<index>].<field>``. ``run_grader`` never raises: a grader that raises gives
an errored ``GradeResult`` (``passed=None``), never a fail or a pass. Every result has a
reason; scores are in [0, 1], a non-finite score is an error.

Kinds (``config`` options in brackets, defaults after ``=``):
- ``exact`` [value]: output == value or the case's expected (non-string expected values as
  canonical JSON, so ``4`` matches ``"4"``).
- ``normalized`` [value]: ``exact`` after ``normalize_text`` on both sides.
- ``contains`` / ``not_contains`` [value | values, case_sensitive=False, word=True,
  match="all"|"any" (contains only)]: with ``word`` a value must stand as a whole word
  ("refund" is not in "refunds"). Score = fraction of values satisfying the check.
- ``regex`` [pattern, flags=[], must_match=True]: ``regex`` package, ``re`` syntax, under
  ``REGEX_TIME_LIMIT_S`` seconds (a catastrophic pattern is an errored grade, not a hung
  worker); flags by name (``IGNORECASE``...) or letter (i m s x a).
- ``json_schema`` [schema]: output is JSON valid under ``schema`` (Draft 2020-12).
- ``numeric`` [value, pattern, abs_tol=0.0, rel_tol=1e-9]: see ``parse_number``/``_numeric``.
- ``python`` [function="package.module:function"]: an oracle
  ``function(case, output) -> GradeResult | bool | dict`` registered as kind ``grader``
  (``core.registry``); nothing is imported from the name.
- ``contract`` [schema, items, id_field, oracle, coverage, required_coverage, provenance,
  source_version, review]: ``evals.grading.contract``, docs/contracts.md. ``passed`` means
  qualified for review (``details.decision = "review"``), never accepted; a fail is a
  ``reject`` with its failures and coverage table.
- ``state`` [mode="exact"|"subset", goal, ignore] and ``trajectory`` [required, forbidden,
  order, before, arguments, max_steps, max_tokens, max_cost_usd]: an agent's outcome and
  path (``evals.grading.agent``, docs/agents.md), read from ``AgentData`` passed as
  ``agent=``. No final state or goal is an errored grade. ``trajectory`` is non-gating
  unless the set says ``"gating": true``.
- ``judge`` [judge_version="<uuid>" | "JUDGE:vN" | "JUDGE", or judge="JUDGE" and
  judge_number=N, skip_if_failed=False]: an LLM judge version, graded by the judges app's
  rung (``evals.grading.rungs``), not here; the runner enqueues it after a chunk's
  deterministic grades (``JudgeRung.chunk_enqueue``).
"""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import regex

from core.registry import registry_get
from evals.grading.agent.data import AgentData, AgentOutcome
from evals.grading.agent.state import state_grade
from evals.grading.grader_set import STATE_KIND, TRAJECTORY_KIND, GraderSpec

# The kinds built on jsonschema and celpy (json_schema, contract, trajectory) import them
# where they are used, not here: every process importing the graders (a command that starts
# a run of ``contains`` graders) would pay half a second for them.


@dataclass(frozen=True)
class GradeResult:
    """A grader's output: ``passed`` (None when errored), ``score`` in [0, 1] or None,
    ``reason`` (always non-empty), ``status`` "ok" or "error", ``details`` JSON-safe."""

    passed: bool | None
    reason: str
    score: float | None = None
    status: str = "ok"
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def error(cls, reason: str, **details: Any) -> GradeResult:
        return cls(passed=None, score=None, reason=reason, status="error", details=details)


def _verdict(passed: bool, reason: str, score: float | None = None, **details: Any) -> GradeResult:
    if score is None:
        score = 1.0 if passed else 0.0
    return GradeResult(passed=passed, score=score, reason=reason, details=details)


# --- text helpers -------------------------------------------------------------------------

_SPACE_RE = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """The ``normalized`` grader's rule, in this order: Unicode NFKC; ``str.casefold``;
    every run of whitespace becomes one space; then leading and trailing whitespace and
    punctuation (Unicode categories P*, which include all quote marks) are stripped.
    ``'  «Hello,   WORLD!» '`` -> ``'hello, world'``."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _SPACE_RE.sub(" ", text)
    start, end = 0, len(text)
    while start < end and (text[start].isspace() or unicodedata.category(text[start])[0] == "P"):
        start += 1
    while end > start and (
        text[end - 1].isspace() or unicodedata.category(text[end - 1])[0] == "P"
    ):
        end -= 1
    return text[start:end]


_NUMBER_RE = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def parse_number(text: str) -> float | None:
    """Read a number from ``text`` (surrounding whitespace ignored): optional sign, digits
    with optional ``,`` thousands separators in groups of three, optional decimals and
    exponent. ``"1,234.5"`` -> 1234.5; ``"96.12"`` -> 96.12. Returns None for anything else
    ("about 96", "", "nan", "inf"): non-finite values are never numbers here."""
    text = text.strip()
    if not _NUMBER_RE.fullmatch(text):
        return None
    value = float(text.replace(",", ""))
    return value if math.isfinite(value) else None


def _expected_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _reference(config: dict, case: Any) -> tuple[bool, Any]:
    """(found, value): config ``value`` wins over the case's expected; missing -> (False, None)."""
    if "value" in config:
        return True, config["value"]
    expected = getattr(case, "expected", None)
    return expected is not None, expected


_NO_REFERENCE = "no reference: the grader has no config value and the case has no expected"


# --- graders ------------------------------------------------------------------------------


def _exact(config: dict, case: Any, output: str) -> GradeResult:
    found, ref = _reference(config, case)
    if not found:
        return GradeResult.error(_NO_REFERENCE)
    ref = _expected_text(ref)
    if output == ref:
        return _verdict(True, "output equals the expected text")
    return _verdict(False, "output differs from the expected text")


def _normalized(config: dict, case: Any, output: str) -> GradeResult:
    found, ref = _reference(config, case)
    if not found:
        return GradeResult.error(_NO_REFERENCE)
    if normalize_text(output) == normalize_text(_expected_text(ref)):
        return _verdict(True, "output equals the expected text after normalisation")
    return _verdict(False, "output differs from the expected text after normalisation")


def _needles(config: dict, case: Any) -> list[str] | None:
    if "values" in config:
        return list(config["values"])
    if "value" in config:
        return [config["value"]]
    expected = getattr(case, "expected", None)
    if isinstance(expected, str):
        return [expected]
    if isinstance(expected, list) and expected and all(isinstance(v, str) for v in expected):
        return list(expected)
    return None


@functools.lru_cache(maxsize=4096)
def _word_pattern(needle: str, flags: int) -> re.Pattern:
    """``needle`` as a whole word, compiled once (``re``'s cache holds only 512 patterns)."""
    return re.compile(rf"(?<!\w){re.escape(needle)}(?!\w)", flags)


def _is_word_char(char: str) -> bool:
    """``\\w`` of ``re`` for one ASCII character: a letter, a digit or ``_``."""
    return char.isalnum() or char == "_"


def _word_found_ascii(needle: str, output: str) -> bool:
    """``(?<!\\w)needle(?!\\w)`` in ``output``, both ASCII: ``_word_pattern``'s answer without
    compiling a pattern per needle."""
    start = output.find(needle)
    while start != -1:
        end = start + len(needle)
        before_ok = start == 0 or not _is_word_char(output[start - 1])
        after_ok = end == len(output) or not _is_word_char(output[end])
        if before_ok and after_ok:
            return True
        start = output.find(needle, start + 1)
    return False


def _found(needle: str, output: str, *, case_sensitive: bool, word: bool) -> bool:
    flags = 0 if case_sensitive else re.IGNORECASE
    if word:
        if needle.isascii() and output.isascii():
            if case_sensitive:
                return _word_found_ascii(needle, output)
            return _word_found_ascii(needle.lower(), output.lower())
        return _word_pattern(needle, flags).search(output) is not None
    if case_sensitive:
        return needle in output
    return needle.casefold() in output.casefold()


def _contains_check(config: dict, case: Any, output: str, *, negate: bool) -> GradeResult:
    needles = _needles(config, case)
    if not needles:
        return GradeResult.error("no values: set config value/values or a string expected")
    case_sensitive = config.get("case_sensitive", False)
    word = config.get("word", True)
    present = [n for n in needles if _found(n, output, case_sensitive=case_sensitive, word=word)]
    absent = [n for n in needles if n not in present]
    unit = "word" if word else "text"
    if negate:
        score = len(absent) / len(needles)
        if present:
            return _verdict(False, f"forbidden {unit} present: {present}", score)
        return _verdict(True, f"none of {needles} present", score)
    score = len(present) / len(needles)
    passed = bool(present) if config.get("match", "all") == "any" else not absent
    if passed:
        return _verdict(True, f"found {present}", score)
    return _verdict(False, f"{unit} not found: {absent}", score)


def _contains(config: dict, case: Any, output: str) -> GradeResult:
    return _contains_check(config, case, output, negate=False)


def _not_contains(config: dict, case: Any, output: str) -> GradeResult:
    return _contains_check(config, case, output, negate=True)


# Regex flags a grader's config may name (``flags``), by name and by letter.
REGEX_FLAGS = {
    "i": regex.IGNORECASE,
    "ignorecase": regex.IGNORECASE,
    "m": regex.MULTILINE,
    "multiline": regex.MULTILINE,
    "s": regex.DOTALL,
    "dotall": regex.DOTALL,
    "x": regex.VERBOSE,
    "verbose": regex.VERBOSE,
    "a": regex.ASCII,
    "ascii": regex.ASCII,
}
# Seconds a grader's pattern may search one output (the ``regex`` package's ``timeout``).
REGEX_TIME_LIMIT_S = 1.0


def pattern_compile(pattern: str, flags: list[str]) -> regex.Pattern:
    """A grader's pattern, compiled by the ``regex`` package in its ``re``-compatible mode
    (VERSION0); raises ``regex.error`` for a bad one."""
    value = regex.VERSION0
    for name in flags:
        value |= REGEX_FLAGS[name.lower()]
    return regex.compile(pattern, value)


def _search(pattern: str, output: str, flags: list[str] | None = None) -> Any:
    """The first match of a grader's ``pattern`` in ``output`` (or None); raises
    ``TimeoutError`` after ``REGEX_TIME_LIMIT_S`` seconds."""
    return pattern_compile(pattern, flags or []).search(output, timeout=REGEX_TIME_LIMIT_S)


def _too_slow(pattern: str) -> GradeResult:
    return GradeResult.error(
        f"pattern {pattern[:200]!r} took longer than {REGEX_TIME_LIMIT_S:g} s on this output "
        "(catastrophic backtracking?); no verdict"
    )


def _regex(config: dict, case: Any, output: str) -> GradeResult:
    must_match = config.get("must_match", True)
    try:
        match = _search(config["pattern"], output, config.get("flags", []))
    except TimeoutError:
        return _too_slow(config["pattern"])
    if must_match:
        if match:
            return _verdict(True, f"pattern matched at {match.start()}")
        return _verdict(False, f"pattern {config['pattern']!r} not found")
    if match:
        return _verdict(
            False, f"forbidden pattern {config['pattern']!r} matched at {match.start()}"
        )
    return _verdict(True, f"pattern {config['pattern']!r} absent")


def _json_path(path) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} is not JSON")


def _json_schema(config: dict, case: Any, output: str) -> GradeResult:
    """Score = fraction of the schema's top-level ``required`` keys present in the output
    object (1.0/0.0 when the schema requires none). Reason: ``missing keys: [...]`` for the
    top level (in the schema's order), ``<json path>: missing keys: [...]`` for nested
    objects, ``<json path>: <message>`` for every other validation error."""
    schema = config["schema"]
    required = schema.get("required", []) if isinstance(schema, dict) else []
    try:
        data = json.loads(output, parse_constant=_reject_constant)
    except ValueError as exc:
        return _verdict(False, f"invalid JSON: {exc}", 0.0)
    import jsonschema  # noqa: PLC0415 - see the imports

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.path)), e.message))
    missing: dict[str, list[str]] = {}
    others: list[str] = []
    for error in errors:
        path = _json_path(error.absolute_path)
        if error.validator == "required" and isinstance(error.instance, dict):
            keys = [k for k in error.validator_value if k not in error.instance]
            missing.setdefault(path, [])
            missing[path] += [k for k in keys if k not in missing[path]]
        else:
            others.append(f"{path}: {error.message}")
    present = [k for k in required if isinstance(data, dict) and k in data]
    valid = not errors
    score = (len(present) / len(required)) if required else (1.0 if valid else 0.0)
    if valid:
        return _verdict(True, "valid against the schema", score)
    parts = [
        (f"missing keys: {keys}" if path == "$" else f"{path}: missing keys: {keys}")
        for path, keys in missing.items()
    ]
    return _verdict(False, "; ".join(parts + others), score, errors=len(errors))


def _numeric(config: dict, case: Any, output: str) -> GradeResult:
    """Extraction: with config ``pattern`` (one capturing group), the group of the first match;
    without, the whole output, read by ``parse_number``. Comparison: ``math.isclose(got, ref,
    rel_tol=rel_tol, abs_tol=abs_tol)``. An output without a number is a fail, not an error."""
    found, ref = _reference(config, case)
    if not found:
        return GradeResult.error(_NO_REFERENCE)
    ref_value = ref if isinstance(ref, int | float) and not isinstance(ref, bool) else None
    if isinstance(ref, str):
        ref_value = parse_number(ref)
    if ref_value is None or not math.isfinite(ref_value):
        return GradeResult.error(f"reference is not a number: {ref!r}")
    text = output
    if "pattern" in config:
        try:
            match = _search(config["pattern"], output)
        except TimeoutError:
            return _too_slow(config["pattern"])
        if not match or match.group(1) is None:
            return _verdict(False, f"no number: pattern {config['pattern']!r} not found")
        text = match.group(1)
    got = parse_number(text)
    if got is None:
        return _verdict(False, f"not a number: {text[:80]!r}")
    abs_tol = float(config.get("abs_tol", 0.0))
    rel_tol = float(config.get("rel_tol", 1e-9))
    diff = abs(got - ref_value)
    tol = f"abs_tol {abs_tol:g}, rel_tol {rel_tol:g}"
    if math.isclose(got, ref_value, rel_tol=rel_tol, abs_tol=abs_tol):
        return _verdict(True, f"{got:g} is within {tol} of {ref_value:g} (|diff| = {diff:g})")
    return _verdict(False, f"{got:g} is not within {tol} of {ref_value:g} (|diff| = {diff:g})")


def _python(config: dict, case: Any, output: str) -> GradeResult:
    """Call the oracle; a ``bool`` is the verdict, a ``dict`` needs ``passed`` (bool) and may
    carry ``score`` and ``reason``; anything else is an errored grade."""
    result = registry_get(name=config["function"], kind="grader", field="function")(case, output)
    name = config["function"]
    if isinstance(result, GradeResult):
        return result
    if isinstance(result, bool):
        return _verdict(result, f"{name} returned {result}")
    if isinstance(result, dict) and isinstance(result.get("passed"), bool):
        passed = result["passed"]
        score = result.get("score")
        reason = result.get("reason") or f"{name} returned passed={passed}"
        return _verdict(passed, str(reason), score)
    return GradeResult.error(
        f"{name} returned {type(result).__name__}; expected GradeResult, bool or "
        "dict with a boolean 'passed'"
    )


def _contract(config: dict, case: Any, output: str) -> GradeResult:
    """A contract's decision: ``review`` passes (qualified for review, not accepted),
    ``reject`` fails; a broken oracle or predicate is an errored grade."""
    from evals.grading.contract.check import ContractBroken, contract_check  # noqa: PLC0415
    from evals.grading.contract.config import contract_from_config  # noqa: PLC0415

    try:
        outcome = contract_check(contract_from_config(config), output)
    except ContractBroken as exc:
        return GradeResult.error(f"contract broken: {exc}", decision="error")
    passed = outcome.decision == "review"
    return _verdict(passed, outcome.reason, **outcome.details())


def _agent_result(outcome: AgentOutcome) -> GradeResult:
    if outcome.passed is None:
        return GradeResult.error(outcome.reason, **outcome.details)
    return _verdict(outcome.passed, outcome.reason, **outcome.details)


def _state(config: dict, case: Any, output: str, agent: AgentData) -> GradeResult:
    return _agent_result(state_grade(config, getattr(case, "goal_state", None), agent))


def _trajectory(config: dict, case: Any, output: str, agent: AgentData) -> GradeResult:
    from evals.grading.agent.trajectory import trajectory_grade  # noqa: PLC0415

    return _agent_result(trajectory_grade(config, agent))


# kind -> function(config: dict, case: CaseInput-like, output: str) -> GradeResult; the
# agent kinds (``AGENT_GRADERS``) take the trial's ``AgentData`` as a fourth argument.
AGENT_GRADERS: dict[str, Callable[..., GradeResult]] = {
    STATE_KIND: _state,
    TRAJECTORY_KIND: _trajectory,
}
GRADERS: dict[str, Callable[..., GradeResult]] = {
    **AGENT_GRADERS,
    "exact": _exact,
    "normalized": _normalized,
    "contains": _contains,
    "not_contains": _not_contains,
    "regex": _regex,
    "json_schema": _json_schema,
    "numeric": _numeric,
    "python": _python,
    "contract": _contract,
}


def run_grader(
    spec: GraderSpec, *, case: Any, output: str, agent: AgentData | None = None
) -> GradeResult:
    """Grade one output. Never raises: an exception, a non-``GradeResult``, an empty reason or a
    score outside [0, 1] gives an errored result naming the exception. A judge spec is not
    graded here. Agent kinds read ``agent`` (trajectory, final state); without it, errored."""
    if spec.is_judge:
        return GradeResult.error("judge graders are graded by the judge task, not run_grader")
    try:
        if spec.reads_agent:
            if agent is None:
                return GradeResult.error(
                    f"{spec.kind} grader given no trajectory or final state to read"
                )
            result = AGENT_GRADERS[spec.kind](spec.config, case, output, agent)
        else:
            result = GRADERS[spec.kind](spec.config, case, output)
    except Exception as exc:  # noqa: BLE001 - the contract: a grader never raises
        return GradeResult.error(f"{type(exc).__name__}: {exc}", exception=type(exc).__name__)
    if not isinstance(result, GradeResult):
        return GradeResult.error(f"grader returned {type(result).__name__}, not GradeResult")
    if result.status == "error" or result.passed is None:
        return GradeResult.error(result.reason or "errored", **result.details)
    score = result.score
    if score is not None and (
        isinstance(score, bool)
        or not isinstance(score, int | float)
        or not math.isfinite(score)
        or not 0.0 <= score <= 1.0
    ):
        return GradeResult.error(f"score {score!r} is not a finite number in [0, 1]")
    if not isinstance(result.passed, bool):
        return GradeResult.error(f"passed {result.passed!r} is not a boolean")
    if not result.reason:
        return GradeResult(
            passed=result.passed,
            score=score,
            reason="passed" if result.passed else "failed",
            details=result.details,
        )
    return result
