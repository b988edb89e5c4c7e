"""Checking one output against a contract: ``contract_check(contract, output)``.

1. Parse, stopping at the first failure: ``invalid_json`` (strict JSON), ``schema`` (named by
   the item's id when it has one), ``items`` (not a list of objects with ids).
2. Every other check, all failures reported: ``stale_version``; per item ``duplicate_id``,
   ``unknown_source``, a ``wrong_<path>`` per expected leaf the oracle disagrees with
   (canonical JSON: ``true`` is not ``1``); ``missing_coverage`` per required category
   (covered by items the oracle confirmed).
3. ``reject`` on any failure, else ``review``: a contract never accepts (docs/contracts.md).

An oracle or predicate that raises or is not boolean is ``ContractBroken``: an errored grade."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import celpy
import jsonschema
from celpy import celtypes

from core.registry import registry_get
from core.strict_json import contains_non_finite, json_loads_line
from evals.grading.contract.config import Contract, Predicate

REJECT, REVIEW = "reject", "review"
PARSE_RULES = ("invalid_json", "schema", "items")
_MAX_LISTED = 5


class ContractBroken(Exception):
    """The contract's own oracle or predicate failed on an item (an errored grade)."""


def _is_integer(_checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


def _is_number(_checker: Any, instance: Any) -> bool:
    return isinstance(instance, int | float) and not isinstance(instance, bool)


# Strict types: jsonschema's default "integer" accepts 75000.0; integer cents do not.
_StrictValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", _is_integer
    ).redefine("number", _is_number),
)


@dataclass(frozen=True)
class Failure:
    """One failure: ``rule`` (``wrong_approval``), ``item`` (the item's id, the category for
    ``missing_coverage``, the JSON path for ``schema``, or None), ``message``, the item's
    coverage ``categories``, and its ``kind``: ``parse``, ``version``, ``identity``,
    ``provenance``, ``outcome`` (a policy error) or ``coverage``."""

    rule: str
    item: str | None
    message: str
    categories: tuple[str, ...] = ()
    kind: str = "parse"

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "item": self.item,
            "message": self.message,
            "categories": list(self.categories),
            "kind": self.kind,
        }


@dataclass
class ContractOutcome:
    """The result of ``contract_check``: ``decision`` (``reject``/``review``), ``failures``,
    ``coverage`` (category -> ``{"items", "confirmed", "covered", "required"}``, empty when
    parsing failed), ``review`` (open dimensions; empty on reject), ``parsed``, ``n_items``."""

    decision: str
    failures: list[Failure] = field(default_factory=list)
    coverage: dict[str, dict[str, Any]] = field(default_factory=dict)
    review: tuple[str, ...] = ()
    parsed: bool = True
    n_items: int | None = None

    @property
    def reason(self) -> str:
        """``"reject: wrong_approval at T-750; ..."`` or ``"review: ...; open: a, b"``."""
        if self.decision == REVIEW:
            open_dims = ", ".join(self.review) if self.review else "none declared"
            return f"review: every deterministic check passed; open: {open_dims}"
        return "reject: " + "; ".join(_failure_texts(self.failures))

    @property
    def missing_coverage(self) -> list[str]:
        """The required categories not covered."""
        return [f.item for f in self.failures if f.rule == "missing_coverage" and f.item]

    def details(self) -> dict[str, Any]:
        """JSON-safe details stored on the grade."""
        return {
            "decision": self.decision,
            "parsed": self.parsed,
            "items": self.n_items,
            "failures": [f.as_dict() for f in self.failures],
            "coverage": self.coverage,
            "missing_coverage": self.missing_coverage,
            "review": list(self.review),
        }


def _listed(items: list[str]) -> str:
    if len(items) <= _MAX_LISTED:
        return ", ".join(items)
    return ", ".join(items[:_MAX_LISTED]) + f" and {len(items) - _MAX_LISTED} more"


def _failure_texts(failures: list[Failure]) -> list[str]:
    """One text per rule in first-seen order, items grouped (``wrong_approval at T-1,
    T-2``); parse failures, ``stale_version`` and missing coverage keep their message."""
    grouped: dict[str, list[str]] = {}
    order: list[str] = []
    for failure in failures:
        if failure.rule in PARSE_RULES or failure.rule == "stale_version" or not failure.item:
            order.append(failure.message)
        elif failure.rule == "missing_coverage":
            key = "\0missing"
            if key not in grouped:
                order.append(key)
            grouped.setdefault(key, []).append(failure.item)
        else:
            if failure.rule not in grouped:
                order.append(failure.rule)
            items = grouped.setdefault(failure.rule, [])
            if failure.item not in items:
                items.append(failure.item)
    out = []
    for key in order:
        if key == "\0missing":
            names = grouped[key]
            noun = "category" if len(names) == 1 else "categories"
            out.append(f"{_listed(names)} {noun} not covered")
        elif key in grouped:
            out.append(f"{key} at {_listed(grouped[key])}")
        else:
            out.append(key)
    return out


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _from_cel(value: Any) -> Any:
    """A CEL value as plain JSON-able Python (BoolType is an int subclass: made a bool)."""
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _from_cel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_cel(v) for v in value]
    return value


def _activation(item: dict, item_id: str) -> Any:
    """The item as CEL values, once per item (every predicate reads the same one)."""
    try:
        return celpy.json_to_cel(item)
    except Exception as exc:  # noqa: BLE001 - a value CEL cannot hold is the contract's
        raise ContractBroken(f"item {item_id} cannot be read by CEL: {exc}") from exc


def _evaluate(predicate: Predicate, activation: Any, item_id: str) -> Any:
    try:
        return predicate.program.evaluate(activation)
    except Exception as exc:  # noqa: BLE001 - CEL raises several kinds; all are the grader's
        message = str(exc.args[0]) if exc.args else type(exc).__name__
        raise ContractBroken(
            f"{predicate.name} ({predicate.source!r}) failed on item {item_id}: "
            f"{message.splitlines()[0][:200]}"
        ) from exc


def _expected(contract: Contract, item: dict, item_id: str, activation: Any) -> dict[str, Any]:
    """The oracle's expected fields for ``item`` (plain JSON values)."""
    if contract.oracle_function:
        try:
            oracle = registry_get(
                name=contract.oracle_function, kind="oracle", field="oracle.function"
            )
            result = oracle(dict(item))
        # The oracle is user code; a SystemExit from it (``sys:exit`` as an oracle) must not
        # end the worker or the request either.
        except (Exception, SystemExit) as exc:  # noqa: BLE001
            raise ContractBroken(
                f"oracle {contract.oracle_function} raised on item {item_id}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(result, dict) or not all(isinstance(k, str) for k in result):
            raise ContractBroken(
                f"oracle {contract.oracle_function} returned {type(result).__name__} on item "
                f"{item_id}; expected an object of field: expected value"
            )
        return result
    return {p.name: _from_cel(_evaluate(p, activation, item_id)) for p in contract.expressions}


def _categories(contract: Contract, activation: Any, item_id: str) -> tuple[str, ...]:
    names = []
    for predicate in contract.coverage:
        value = _evaluate(predicate, activation, item_id)
        if not isinstance(value, celtypes.BoolType | bool):
            raise ContractBroken(
                f"coverage {predicate.name} ({predicate.source!r}) gave "
                f"{type(value).__name__}, not a boolean, on item {item_id}"
            )
        if value:
            names.append(predicate.name)
    return tuple(names)


def _at(document: Any, path: tuple[str, ...]) -> tuple[bool, Any]:
    node = document
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _leaves(expected: dict, prefix: str = "") -> list[tuple[str, Any]]:
    """The oracle's expectation as ``(dotted path, value)`` leaves: a non-empty object is
    walked into (``{"expected": {"approvalRequired": true}}`` is the leaf
    ``expected.approvalRequired``); anything else is compared whole."""
    out: list[tuple[str, Any]] = []
    for name, value in expected.items():
        path = f"{prefix}{name}"
        if isinstance(value, dict) and value:
            out.extend(_leaves(value, f"{path}."))
        else:
            out.append((path, value))
    return out


def _schema_failure(contract: Contract, document: Any, error: Any) -> Failure:
    """The first schema violation, named by the failing item's id when it lies inside an
    item that has one (``schema at T-NR, field hasReceipt: ...``), else by its JSON path."""
    path = list(error.absolute_path)
    n = len(contract.items_path)
    if len(path) > n and tuple(path[:n]) == contract.items_path and isinstance(path[n], int):
        found, items = _at(document, contract.items_path)
        item = items[path[n]] if found and isinstance(items, list) else None
        item_id = item.get(contract.id_field) if isinstance(item, dict) else None
        if isinstance(item_id, str | int) and not isinstance(item_id, bool):
            inner = _json_path(path[n + 1 :])[1:].lstrip(".")
            where = f"{item_id}, field {inner}" if inner else str(item_id)
            return Failure("schema", str(item_id), f"schema at {where}: {error.message}")
    where = _json_path(path)
    return Failure("schema", where, f"schema at {where}: {error.message}")


def _json_path(path: Any) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _parse(contract: Contract, output: str) -> tuple[list[dict] | None, Any, Failure | None]:
    """Step 1: (items, document, None) or (None, None, the first failure)."""
    try:
        document = json_loads_line(output)
        if contains_non_finite(document):
            raise ValueError("NaN or Infinity is not JSON")
    except ValueError as exc:
        return None, None, Failure("invalid_json", None, f"invalid_json: {exc}")
    errors = list(_StrictValidator(contract.schema).iter_errors(document))
    if errors:
        # Document order: list positions by number ($.cases[10] after $.cases[9]).
        first = min(
            errors,
            key=lambda e: ([(isinstance(p, str), p) for p in e.absolute_path], e.validator),
        )
        return None, None, _schema_failure(contract, document, first)
    found, items = _at(document, contract.items_path)
    where = "$." + ".".join(contract.items_path) if contract.items_path else "$"
    if not found or not isinstance(items, list):
        return None, None, Failure("items", where, f"items: no list at {where}")
    for index, item in enumerate(items):
        item_id = item.get(contract.id_field) if isinstance(item, dict) else None
        if not isinstance(item_id, str | int) or isinstance(item_id, bool):
            return (
                None,
                None,
                Failure(
                    "items",
                    f"{where}[{index}]",
                    f"items: {where}[{index}] is not an object with a string or integer "
                    f"{contract.id_field!r}",
                ),
            )
    return items, document, None


def contract_check(contract: Contract, output: str) -> ContractOutcome:
    """Check ``output`` against ``contract``; raises ``ContractBroken`` when its oracle fails.
    Long: the module's steps in order, each reading what the previous one parsed."""
    items, document, parse_failure = _parse(contract, output)
    if parse_failure is not None:
        return ContractOutcome(decision=REJECT, failures=[parse_failure], parsed=False)
    assert items is not None  # _parse gives the items whenever it gives no failure
    failures: list[Failure] = []
    if contract.current_version is not None:
        found, version = _at(document, contract.version_path)
        if version != contract.current_version:
            shown = json.dumps(version) if found else "missing"
            failures.append(
                Failure(
                    "stale_version",
                    None,
                    f"stale_version: output for {shown}, current "
                    f"{json.dumps(contract.current_version)}",
                    kind="version",
                )
            )
    table: dict[str, dict[str, Any]] = {
        p.name: {
            "items": [],
            "confirmed": [],
            "covered": False,
            "required": p.name in contract.required_coverage,
        }
        for p in contract.coverage
    }
    seen: set[str] = set()
    duplicated: set[str] = set()
    for item in items:
        item_id = str(item[contract.id_field])
        activation = _activation(item, item_id)
        categories = _categories(contract, activation, item_id)
        if item_id in seen and item_id not in duplicated:  # once per id, at its 2nd use
            duplicated.add(item_id)
            failures.append(
                Failure(
                    "duplicate_id", item_id, f"duplicate_id at {item_id}", categories, "identity"
                )
            )
        seen.add(item_id)
        if contract.provenance_field is not None:
            sources = item.get(contract.provenance_field)
            sources = sources if isinstance(sources, list) else [sources]
            unknown = [s for s in sources if s not in contract.allowed_sources]
            if unknown:
                failures.append(
                    Failure(
                        "unknown_source",
                        item_id,
                        f"unknown_source at {item_id}: {', '.join(map(str, unknown))}",
                        categories,
                        "provenance",
                    )
                )
        confirmed = True
        for name, want in _leaves(_expected(contract, item, item_id, activation)):
            present, got = _at(item, tuple(name.split(".")))
            if present and _canonical(got) == _canonical(want):
                continue
            confirmed = False
            shown = _canonical(got) if present else "missing"
            failures.append(
                Failure(
                    contract.rule_for(name),
                    item_id,
                    f"{contract.rule_for(name)} at {item_id}: {name} is {shown}, "
                    f"the oracle expects {_canonical(want)}",
                    categories,
                    "outcome",
                )
            )
        for name in categories:
            table[name]["items"].append(item_id)
            if confirmed:
                table[name]["confirmed"].append(item_id)
                table[name]["covered"] = True
    for name in contract.required_coverage:
        if not table[name]["covered"]:
            failures.append(
                Failure(
                    "missing_coverage", name, f"{name} category not covered", (name,), "coverage"
                )
            )
    if failures:
        return ContractOutcome(
            decision=REJECT, failures=failures, coverage=table, n_items=len(items)
        )
    return ContractOutcome(
        decision=REVIEW, coverage=table, review=contract.review, n_items=len(items)
    )
