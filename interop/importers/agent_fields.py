"""An agent trial's fields from outside, read one way by every importer (bulk ingest, JSONL and
CSV files, the run CSV, Inspect logs): ``trajectory`` (``evals.trajectory.steps``),
``final_state`` and ``goal_state`` (any JSON). Null or absent is none; ``{}`` is a state (an
empty world can be graded); a bad value is refused naming the record and step
(``trajectory[3].arguments``). Nothing of an agent's goes to ``extra``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from core.errors import DomainError
from evals.trajectory.steps import final_state_parse, trajectory_parse
from interop.importers.reader import record_error

AGENT_FIELDS = ("trajectory", "final_state", "goal_state")


@dataclass(frozen=True)
class AgentFields:
    """The parsed agent fields of one record; None where the record has none."""

    trajectory: list[dict] | None = None
    final_state: Any = None
    goal_state: Any = None


NONE = AgentFields()


def agent_fields_parse(
    values: dict[str, Any],
    *,
    where: str,
    record: int | None = None,
    text: bool = False,
    fields: dict[str, str] | None = None,
) -> AgentFields:
    """``values[name]`` for each of ``AGENT_FIELDS`` through ``trajectory_parse`` /
    ``final_state_parse``. ``text``: the values are JSON text (a CSV cell; "" is none).
    ``fields``: the name to give each field in errors (Inspect's ``samples[2].store``);
    default the field's own name. Raises ``DomainError`` (``record_error``: ``where``,
    the field or step path, ``record``)."""
    if not any(values.get(name) is not None for name in AGENT_FIELDS):
        return NONE
    names = fields or {}
    parsed: dict[str, Any] = {}
    for name in AGENT_FIELDS:
        value = values.get(name)
        label = names.get(name, name)
        if text and isinstance(value, str):
            if not value.strip():
                value = None
            else:
                try:
                    value = json.loads(value)
                except ValueError:
                    raise record_error(where, label, "expected JSON text", record=record) from None
        if value is None:
            parsed[name] = None
            continue
        parse = trajectory_parse if name == "trajectory" else final_state_parse
        try:
            parsed[name] = parse(value, field=label)
        except DomainError as exc:
            raise record_error(where, exc.field or label, exc.message, record=record) from exc
    return AgentFields(**parsed)
