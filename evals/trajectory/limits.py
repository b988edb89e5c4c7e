"""A trial stopped at a limit: one error kind per limit, wherever the trial ran.

A capped agent did not finish its task: the trial is errored (never graded), with
``error_message`` ``"<kind>: <reason>"`` built by ``limit_error`` in the tool loop and the
importers, and counted by kind in the report (``limit_kind``). Kinds: ``step_cap`` (model
calls, messages), ``cost_cap``, ``token_cap`` (context window too), ``time_cap``,
``other_cap``."""

from __future__ import annotations

STEP_CAP = "step_cap"
COST_CAP = "cost_cap"
TOKEN_CAP = "token_cap"
TIME_CAP = "time_cap"
OTHER_CAP = "other_cap"
LIMIT_KINDS = (STEP_CAP, COST_CAP, TOKEN_CAP, TIME_CAP, OTHER_CAP)

# Inspect AI's ``EvalSampleLimit.type`` -> the kind.
INSPECT_LIMITS = {
    "message": STEP_CAP,
    "cost": COST_CAP,
    "token": TOKEN_CAP,
    "context": TOKEN_CAP,
    "time": TIME_CAP,
    "working": TIME_CAP,
}


def limit_error(kind: str, reason: str) -> str:
    """``"<kind>: <reason>"`` for a trial stopped at a limit; ValueError for an unknown kind."""
    if kind not in LIMIT_KINDS:
        raise ValueError(f"not a limit kind: {kind!r}")
    return f"{kind}: {reason}"


def limit_kind(error_message: str) -> str | None:
    """The limit kind an errored trial's message starts with, or None."""
    head, sep, _ = (error_message or "").partition(":")
    return head if sep and head in LIMIT_KINDS else None
