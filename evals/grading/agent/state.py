"""The ``state`` grader: an agent trial's final state against the case's goal state.

Config (all optional): ``mode`` ``"exact"`` (default) or ``"subset"`` (goal keys must be
present and equal; others ignored); ``goal`` (replaces the case's); ``ignore`` (paths such as
``refunds[0].id``, left out on both sides). Lists compare position by position (order
matters), numbers by value (``10`` equals ``10.0``; a boolean is never a number).
Differences: ``missing``, ``different``, ``unexpected`` (exact only). Errored, never a pass
or a fail, without a final state (``null`` included) or a goal."""

from __future__ import annotations

import json
import re
from typing import Any

from core.errors import DomainError
from evals.grading.agent.data import AgentData, AgentOutcome

MODES = ("exact", "subset")
OPTIONS = ("mode", "goal", "ignore")
MAX_LISTED = 8  # differences spelled out in the reason; the rest are counted
_VALUE_CHARS = 60
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_PATH_PART = re.compile(r'\.?([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]')


PATH_CHARS = 120  # a path as a reason quotes it (keys of a final state are untrusted)


def path_text(parts: tuple) -> str:
    """A path as people read it: ``order.items[0].sku``; a key that is not a plain name is
    quoted (``["a key"]``); the root is ``$``; longer than ``PATH_CHARS``, cut with "…"."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    out = out or "$"
    return out if len(out) <= PATH_CHARS else out[: PATH_CHARS - 1] + "…"


def _path_parse(text: str, where: str) -> tuple:
    """``order.items[0].sku`` -> ``("order", "items", 0, "sku")``; raises DomainError."""
    parts: list = []
    pos = 0
    while pos < len(text):
        match = _PATH_PART.match(text, pos)
        if not match or match.end() == pos or (pos == 0 and text.startswith(".")):
            raise DomainError(f"not a path: {text!r} (write order.items[0].sku)", field=where)
        name, index, quoted = match.groups()
        parts.append(
            name if name is not None else int(index) if index else json.loads(f'"{quoted}"')
        )
        pos = match.end()
    if not parts:
        raise DomainError("an empty path", field=where)
    return tuple(parts)


def state_parse(config: dict, where: str) -> None:
    """Check a ``state`` grader's config; ``DomainError`` naming ``<where>.<option>``."""
    for name in config:
        if name not in OPTIONS:
            raise DomainError(
                f"unknown option for state (known: {sorted(OPTIONS)})", field=f"{where}.{name}"
            )
    if config.get("mode", "exact") not in MODES:
        raise DomainError("expected 'exact' or 'subset'", field=f"{where}.mode")
    if "goal" in config:
        if config["goal"] is None:
            raise DomainError("a goal is a JSON value, not null", field=f"{where}.goal")
        try:
            json.dumps(config["goal"], allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise DomainError(f"not JSON: {exc}", field=f"{where}.goal") from exc
    ignore = config.get("ignore", [])
    if not isinstance(ignore, list):
        raise DomainError("expected a list of paths", field=f"{where}.ignore")
    for i, item in enumerate(ignore):
        if not isinstance(item, str):
            raise DomainError("expected a path (a string)", field=f"{where}.ignore[{i}]")
        _path_parse(item, f"{where}.ignore[{i}]")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _equal(a: Any, b: Any) -> bool:
    if _is_number(a) and _is_number(b):
        return a == b
    if type(a) is not type(b):
        return False
    return a == b


def _diff(goal: Any, got: Any, path: tuple, subset: bool, ignore: set, out: list) -> None:
    """Append ``(kind, path, goal value, final value)`` for each difference under ``path``."""
    if path in ignore:
        return
    if isinstance(goal, dict) and isinstance(got, dict):
        for key in goal:
            if (*path, key) in ignore:
                continue
            if key not in got:
                out.append(("missing", (*path, key), goal[key], None))
            else:
                _diff(goal[key], got[key], (*path, key), subset, ignore, out)
        if not subset:
            for key in got:
                if key not in goal and (*path, key) not in ignore:
                    out.append(("unexpected", (*path, key), None, got[key]))
        return
    if isinstance(goal, list) and isinstance(got, list):
        if len(goal) != len(got):
            out.append(("different", path, goal, got))
            return
        for i, (a, b) in enumerate(zip(goal, got, strict=True)):
            _diff(a, b, (*path, i), subset, ignore, out)
        return
    if not _equal(goal, got):
        out.append(("different", path, goal, got))


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, list):
        text = f"a list of {len(value)}" if len(text) > _VALUE_CHARS else text
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def _words(kind: str, path: tuple, goal: Any, got: Any) -> str:
    where = f"`{path_text(path)}`"
    if kind == "missing":
        return f"missing {where} (goal {_short(goal)})"
    if kind == "unexpected":
        return f"unexpected {where} ({_short(got)})"
    return f"different {where} (goal {_short(goal)}, got {_short(got)})"


def state_grade(config: dict, goal_state: Any, agent: AgentData) -> AgentOutcome:
    """Grade ``agent.final_state`` against the goal. ``details``: ``mode``, ``differences``
    (``[{"kind", "path"}]``, at most 50), ``n_differences`` and ``group`` (kinds and paths
    without values, for grouping trials)."""
    mode = config.get("mode", "exact")
    goal = config.get("goal", goal_state)
    if goal is None:
        return AgentOutcome(
            None,
            "no goal state: the case has no goal_state and the grader no goal, so the "
            "outcome cannot be judged",
            {"mode": mode, "group": "no goal state"},
        )
    if agent.final_state is None:
        return AgentOutcome(
            None,
            "no final state: the target returned none, so the outcome cannot be judged",
            {"mode": mode, "group": "no final state"},
        )
    ignore = {_path_parse(p, "ignore") for p in config.get("ignore", [])}
    found: list[tuple] = []
    _diff(goal, agent.final_state, (), mode == "subset", ignore, found)
    relation = "the goal" if mode == "exact" else "the goal (as a subset)"
    if not found:
        return AgentOutcome(
            True, f"final state matches {relation}", {"mode": mode, "n_differences": 0}
        )
    listed = [_words(*d) for d in found[:MAX_LISTED]]
    more = f"; and {len(found) - MAX_LISTED} more" if len(found) > MAX_LISTED else ""
    group = "; ".join(sorted({f"{d[0]} `{path_text(d[1])}`" for d in found})[:MAX_LISTED])
    return AgentOutcome(
        False,
        f"final state differs from {relation}: " + "; ".join(listed) + more,
        {
            "mode": mode,
            "n_differences": len(found),
            "differences": [{"kind": d[0], "path": path_text(d[1])} for d in found[:50]],
            "group": group,
        },
    )
