"""Pytest outcomes as Assay trials: the grade of a test, its case key, its record.

The rules (docs/ci.md, "pytest plugin"):
- a test that passes is a passed trial; one whose assertion fails (``AssertionError``, or
  ``pytest.fail``) a failed trial;
- an error in setup or teardown, or the test raising anything else, is an **errored**
  trial (ingest ``status: "error"`` with the exception as ``error_message``): it has no
  grade at all (never a pass, never a skip, never a fail) and counts among the run's errored
  trials;
- a skipped test is no trial at all (it was not attempted);
- text the database cannot store (U+0000, an unpaired surrogate) in what a test recorded is
  replaced with U+FFFD and counted in ``extra["unstorable_replaced"]``, never a lost run;
- the case key is the test's node id without the repeat suffix, so the repeats of a test
  are the attempts of one case (past 200 characters: shortened with a hash, ``case_id``;
  the whole node id is the case's default input).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any

GRADER = "pytest"
KEY_MAX = 200  # characters of a case key (the API refuses longer ones)
REASON_MAX = 2000  # characters of an exception's text kept as the grade's reason
# user_properties (record_property) that are trial fields; every other one goes to extra.
TRIAL_FIELDS = frozenset(
    {
        "input",
        "expected",
        "output",
        "tags",
        "score",
        "model",
        "input_tokens",
        "output_tokens",
        "cost_usd",
    }
)

# What a database cannot store: U+0000 and unpaired surrogates (the server's core.text rule).
# A test's recorded values are what its pipeline returned, untrusted: replaced with U+FFFD
# and counted in ``extra[REPLACED_KEY]``, as the runner does with a model's reply, so one
# odd character neither loses the whole run (the API refuses it) nor crashes the encoder.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"
REPLACED_KEY = "unstorable_replaced"

PASSED, FAILED, ERRORED, SKIPPED = "passed", "failed", "errored", "skipped"
# When phases disagree the worst wins: an error anywhere makes the trial errored.
_RANK = {SKIPPED: 0, PASSED: 1, FAILED: 2, ERRORED: 3}


def case_key(nodeid: str, attempt: int | None) -> str:
    """``nodeid`` without the repeat id of attempt ``attempt`` (``"2-5"``, attempt 2 of 5:
    the last id of the test's parameters, as pytest-repeat and ``--assay-repeat`` write
    it): ``t.py::test_f[a-2-5]`` -> ``t.py::test_f[a]``, ``t.py::test_f[2-5]`` ->
    ``t.py::test_f``. A node id without a repeat id is its own case key."""
    if attempt is None:
        return nodeid
    match = re.search(rf"([\[-]){attempt}-[0-9]+\]$", nodeid)
    if match is None:
        return nodeid
    return nodeid[: match.start()] + ("" if match.group(1) == "[" else "]")


def case_id(key: str) -> str:
    """``key`` as the API's ``case_id`` (at most ``KEY_MAX`` characters): a longer node id
    keeps its start and ends in ``~`` and 16 hex digits of its SHA-256, so the same test
    gets the same short key in every run, and two tests never share one."""
    if len(key) <= KEY_MAX:
        return key
    return f"{key[: KEY_MAX - 17]}~{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def _reason(text: str) -> str:
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 1] + "…"


@dataclass
class TrialResult:
    """One test run (one attempt of one case) gathered over its setup, call and teardown."""

    case: str
    attempt: int
    outcome: str = SKIPPED
    reason: str = ""
    tags: list[str] = field(default_factory=list)
    latency_ms: float | None = None
    created_at: str | None = None
    properties: list[tuple[str, Any]] = field(default_factory=list)
    # Characters already replaced where the test ran (a pytest-xdist worker cannot send a
    # lone surrogate to the controller), in ``properties`` and in ``reason``: added to
    # what ``record`` replaces.
    properties_replaced: int = 0
    reason_replaced: int = 0

    def phase_add(self, outcome: str, reason: str, reason_replaced: int = 0) -> None:
        """Fold in one phase's outcome; the worst outcome (and its reason, with how many of
        its characters were replaced where it ran) wins."""
        if _RANK[outcome] > _RANK[self.outcome]:
            self.outcome, self.reason = outcome, reason
            self.reason_replaced = reason_replaced

    def record(self) -> dict[str, Any] | None:
        """The ingest trial record (docs/ingest.md), or None for a skipped test. Properties
        named like a trial field (``TRIAL_FIELDS``) fill it as given (a value of the wrong
        kind is refused by the server, naming the record and field); the others go to
        ``extra``."""
        if self.outcome == SKIPPED:
            return None
        record: dict[str, Any] = {
            "case_id": case_id(self.case),
            "attempt": self.attempt,
            "grader": GRADER,
        }
        extra: dict[str, Any] = {}
        for name, value in self.properties:
            if name in TRIAL_FIELDS:
                record[name] = _score(value) if name == "score" else value
            else:
                extra[name] = _finite(value)
        record.setdefault("input", self.case)
        if self.tags and "tags" not in record:
            record["tags"] = sorted(set(self.tags))
        if self.outcome == ERRORED:
            # The pipeline failed where it ran: an errored trial, carrying no verdict.
            record["status"] = "error"
            record["error_message"] = _reason(self.reason or "errored")
            record.pop("score", None)
        else:
            record["passed"] = self.outcome == PASSED
            record["reason"] = _reason(self.reason or self.outcome)
        if self.latency_ms is not None:
            record["latency_ms"] = round(self.latency_ms, 3)
        if self.created_at:
            record["created_at"] = self.created_at
        if extra:
            record["extra"] = extra
        record, replaced = storable(record)
        replaced += self.properties_replaced + (self.reason_replaced if self.reason else 0)
        if replaced:
            record.setdefault("extra", {})[REPLACED_KEY] = replaced
        return record


def storable(value: Any) -> tuple[Any, int]:
    """``value`` with every U+0000 and unpaired surrogate in its strings (dict keys too,
    inside lists, tuples and dicts) replaced by U+FFFD, and how many were replaced."""
    if isinstance(value, str):
        return _UNSTORABLE.subn(REPLACEMENT, value)
    if isinstance(value, list | tuple):
        pairs = [storable(v) for v in value]
        return type(value)(v for v, _ in pairs), sum(n for _, n in pairs)
    if isinstance(value, dict):
        out, total = {}, 0
        for key, item in value.items():
            clean_key, n_key = storable(key)
            clean, n = storable(item)
            out[clean_key] = clean
            total += n_key + n
        return out, total
    return value, 0


def _score(value: Any) -> Any:
    """A non-finite score is "not scored": the API's ``"NaN"`` string, never 0."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN"
    return value


def _finite(value: Any) -> Any:
    """``value`` as strict JSON: a non-finite float becomes its text (``"nan"``), a value
    JSON cannot hold its ``repr``; lists and dicts recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    return repr(value)
