"""The run file's field readers: each value checked and converted, or a ``DomainError``
naming its field (``cases[0].trials[1].grades[0].gating``); nothing is coerced."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.utils.dateparse import parse_datetime

from core import bounds
from core.errors import DomainError, value_shown
from core.strict_json import JSON_MAX_DEPTH, nesting_path_past
from interop.importers.reader import TIME_RANGE, time_check
from providers.endpoint import base_url_secret_problem, looks_like_a_key


def _need(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise DomainError(f"missing field {key!r}", field=f"{where}")
    return obj[key]


def _when(value: Any, where: str):
    """An ISO 8601 time with an offset, in UTC, within ``reader.time_check``'s years; else
    ``DomainError`` naming ``where``."""
    if value is None:
        return None
    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
    except ValueError:  # well formed but not a date (2025-02-30)
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise DomainError(f"{value!r} is not an ISO 8601 time with an offset", field=f"{where}")
    utc = time_check(parsed)
    if utc is None:
        raise DomainError(
            f"{value!r} is outside the supported range: a time {TIME_RANGE}", field=f"{where}"
        )
    return utc


def _decimal(value: Any, where: str) -> Decimal | None:
    if value is None:
        return None
    try:
        out = Decimal(str(value))
    except InvalidOperation as exc:
        raise DomainError(f"{value!r} is not a decimal", field=f"{where}") from exc
    if not out.is_finite():
        raise DomainError(f"{value!r} is not finite", field=f"{where}")
    problem = bounds.cost_problem(out)
    if problem:
        raise DomainError(problem, field=where)
    return out


def _count(t: dict, key: str, where: str, *, minimum: int = 0) -> int | None:
    """A trial's whole number ``key`` (tokens, attempt) within ``core.bounds``, or None."""
    value = t.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise DomainError(
            f"expected a whole number, got {value_shown(value)}", field=f"{where}.{key}"
        )
    problem = bounds.count_problem(value, minimum=minimum)
    if problem:
        raise DomainError(problem, field=f"{where}.{key}")
    return value


def _objects(value: Any, where: str) -> list[dict]:
    """A list of JSON objects (``[]`` for null or absent); ``DomainError`` naming ``where`` or
    the item at fault."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise DomainError(f"expected a list of objects, got {value_shown(value)}", field=where)
    for n, item in enumerate(value):
        if not isinstance(item, dict):
            raise DomainError(f"expected an object, got {value_shown(item)}", field=f"{where}[{n}]")
    return value


def _text(obj: dict, key: str, where: str) -> str:
    """A text ``key`` of ``obj``: "" when absent or null; ``DomainError`` for anything else."""
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DomainError(
            f"expected a string or null, got {value_shown(value)}", field=f"{where}.{key}"
        )
    return value


def _flag(obj: dict, key: str, where: str, *, default: bool) -> bool:
    """A true/false ``key`` of ``obj`` (``default`` when absent); "false" is not false."""
    value = obj.get(key, default)
    if not isinstance(value, bool):
        raise DomainError(
            f"expected true or false, got {value_shown(value)}", field=f"{where}.{key}"
        )
    return value


def _score(g: dict, where: str) -> float | None:
    """A grade's ``score``: a number in [0, 1], or None."""
    value = g.get("score")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise DomainError(
            f"expected a number in [0, 1] or null, got {value_shown(value)}",
            field=f"{where}.score",
        )
    return float(value)


def _details(g: dict, where: str) -> dict:
    """A grade's ``details``: an object, {} when absent or null."""
    value = g.get("details")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DomainError(
            f"expected an object or null, got {value_shown(value)}", field=f"{where}.details"
        )
    return value


def _grader(g: dict, where: str) -> str:
    value = _need(g, "grader", where)
    if not isinstance(value, str) or not value:
        raise DomainError(
            f"expected a non-empty string, got {value_shown(value)}", field=f"{where}.grader"
        )
    return value


def _latency(t: dict, where: str) -> float | None:
    value = t.get("latency_ms")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DomainError(
            f"expected a number of ms, got {value_shown(value)}", field=f"{where}.latency_ms"
        )
    problem = bounds.latency_problem(value)
    if problem:
        raise DomainError(problem, field=f"{where}.latency_ms")
    return float(value)


def target_check(value: Any, where: str = "run.target") -> dict:
    """A run file's ``target``, stored and shown to every role as the run's: an object (``{}``
    when absent), nested at most ``JSON_MAX_DEPTH``, with no string that looks like a key and a
    ``base_url`` with no user, password or query (``providers.endpoint``). Not a config check:
    an imported run is never called again by Assay. Raises ``DomainError`` naming the path,
    never repeating a secret."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DomainError(f"expected an object, got {value_shown(value, limit=40)}", field=where)
    if (deep := nesting_path_past(value, path=where)) is not None:
        raise DomainError(f"nested more than {JSON_MAX_DEPTH} deep", field=deep)
    _secrets_refuse(value, where)
    return value


def _secrets_refuse(value: Any, path: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            at = f"{path}.{key}"
            secret_url = key == "base_url" and isinstance(item, str)
            problem = base_url_secret_problem(item) if secret_url else None
            if problem:
                raise DomainError(problem, field=at)
            _secrets_refuse(item, at)
    elif isinstance(value, list):
        for n, item in enumerate(value):
            _secrets_refuse(item, f"{path}[{n}]")
    elif looks_like_a_key(value):
        raise DomainError(
            "looks like a key itself: a run file never holds a key (give the name of the "
            "environment variable that holds it)",
            field=path,
        )


# ``Trial.cost_basis``'s keys (``providers.pricing.Costing.basis``, or ``{"source": "target"}``).
_BASIS_TEXT = ("model", "price", "source")
_BASIS_LISTS = ("classes", "unknown")


def _cost_basis(t: dict, where: str) -> dict | None:
    """A trial's ``cost_basis``: null, or an object of ``model``/``price``/``source`` (string
    or null) and ``classes``/``unknown`` (lists of strings), the keys the cost report and
    ``reprice_run`` read. Raises ``DomainError`` naming the key at fault
    (``{where}.cost_basis.classes``)."""
    value = t.get("cost_basis")
    field = f"{where}.cost_basis"
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DomainError(f"expected an object or null, got {value_shown(value)}", field=field)
    for key, item in value.items():
        if key in _BASIS_TEXT:
            if item is not None and not isinstance(item, str):
                raise DomainError(
                    f"expected a string or null, got {value_shown(item)}", field=f"{field}.{key}"
                )
        elif key in _BASIS_LISTS:
            if not isinstance(item, list) or not all(isinstance(x, str) for x in item):
                raise DomainError(
                    f"expected a list of strings, got {value_shown(item)}", field=f"{field}.{key}"
                )
        else:
            raise DomainError(
                f"unknown key {key[:80]!r}; expected {', '.join(_BASIS_TEXT + _BASIS_LISTS)}",
                field=field,
            )
    return value
