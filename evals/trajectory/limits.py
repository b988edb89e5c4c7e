"""A trial stopped at a limit: one error kind per limit, wherever the trial ran.

An agent stopped by a cap did not finish its task: the trial is **errored** (never a pass,
never a fail, never graded), its ``error_message`` ``"<kind>: <reason>"`` with ``kind`` one
of ``LIMIT_KINDS``. Assay's tool loop (``evals.runner.targets.tool_loop``) and every importer
reading a limit (an Inspect sample's ``limit``) build it with ``limit_error``; the run report
counts them by kind (``limit_kind``).

- ``step_cap``: turns: model calls (the tool loop's ``max_steps``), messages (Inspect's
  ``message_limit``);
- ``cost_cap``: money (``max_cost_usd``; Inspect's ``cost_limit``);
- ``token_cap``: tokens (Inspect's ``token_limit``; its ``context`` window too);
- ``time_cap``: time (Inspect's ``time_limit`` and ``working_limit``);
- ``other_cap``: any other limit a source names (Inspect's ``operator``, ``custom``).
"""

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
    """The ``error_message`` of a trial stopped at a limit: ``"<kind>: <reason>"``. Raises
    ``ValueError`` for a kind not in ``LIMIT_KINDS``."""
    if kind not in LIMIT_KINDS:
        raise ValueError(f"not a limit kind: {kind!r}")
    return f"{kind}: {reason}"


def limit_kind(error_message: str) -> str | None:
    """The limit kind an errored trial's message starts with, or None."""
    head, sep, _ = (error_message or "").partition(":")
    return head if sep and head in LIMIT_KINDS else None
