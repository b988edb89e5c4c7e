"""A contract grader's config, parsed once into a typed ``Contract`` (``contract_parse``);
options and a reference example: docs/contracts.md.

The schema is Draft 2020-12 with strict types: nothing is coerced (``75000.0`` is not an
integer). A rule must name a field the oracle produces (under one of its expressions, or in
the items' schema for a function oracle), else it is refused with a "did you mean". Every
error is a ``DomainError`` naming ``<where>.<option>``."""

from __future__ import annotations

import difflib
import functools
import json
import re
import sys
from dataclasses import dataclass
from typing import Any

import celpy
import jsonschema
from celpy.celparser import CELParseError

from core.errors import DomainError, value_shown
from core.registry import registry_get
from evals.grading.contract import OPTIONS

REQUIRED = ("schema", "items", "id_field", "oracle")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CEL_MAX_CHARS = 2000


@functools.cache
def cel_environment() -> celpy.Environment:
    """The process's CEL environment, built on first use (parsing CEL's grammar takes about a
    second). ``celpy.Environment()`` raises the recursion limit to 2500; it is put back, since
    the run-file reader reports nesting through RecursionError."""
    limit = sys.getrecursionlimit()
    try:
        return celpy.Environment()
    finally:
        sys.setrecursionlimit(limit)


@dataclass(frozen=True)
class Predicate:
    """A named CEL expression, compiled once: ``name``, ``source``, ``program``."""

    name: str
    source: str
    program: Any


@dataclass(frozen=True)
class Contract:
    """A parsed contract; ``expressions`` empty for a function oracle; ``rules``: field -> rule."""

    schema: dict
    items_path: tuple[str, ...]
    id_field: str
    oracle_function: str | None
    expressions: tuple[Predicate, ...]
    rules: dict[str, str]
    coverage: tuple[Predicate, ...]
    required_coverage: tuple[str, ...]
    provenance_field: str | None
    allowed_sources: frozenset[str]
    version_path: tuple[str, ...]
    current_version: str | None
    review: tuple[str, ...]

    def rule_for(self, field: str) -> str:
        """The failure rule of a mismatch on dotted ``field`` (default ``wrong_<path>``)."""
        return self.rules.get(field, "wrong_" + field.replace(".", "_"))


def _string(value: Any, where: str, label: str = "a non-empty string") -> str:
    if not isinstance(value, str) or not value.strip():
        raise DomainError(f"expected {label}, got {value_shown(value)}", field=where)
    return value


def _names(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise DomainError(f"expected a list of names, got {value_shown(value)}", field=where)
    for i, name in enumerate(value):
        _string(name, f"{where}[{i}]")
    if len(set(value)) != len(value):
        raise DomainError("names must be unique", field=where)
    return tuple(value)


def _path(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, str):
        raise DomainError(
            f"expected a dotted path (a string), got {value_shown(value)}", field=where
        )
    parts = tuple(value.split(".")) if value else ()
    if any(not p for p in parts):
        raise DomainError(f"empty segment in path {value!r}", field=where)
    return parts


def _predicates(value: Any, where: str, *, key_label: str) -> tuple[Predicate, ...]:
    if not isinstance(value, dict) or not value:
        raise DomainError(f"expected an object of {key_label}: CEL expression", field=where)
    out = []
    for name, source in value.items():
        if not _NAME_RE.match(name):
            raise DomainError(
                f"{key_label} must be an identifier, got {value_shown(name)}", field=where
            )
        _string(source, f"{where}.{name}", "a CEL expression (a string)")
        if len(source) > CEL_MAX_CHARS:
            raise DomainError(
                f"at most {CEL_MAX_CHARS} characters, got {len(source)}", field=f"{where}.{name}"
            )
        try:
            cel = cel_environment()
            program = cel.program(cel.compile(source))
        except RecursionError as exc:
            raise DomainError("expression nested too deeply", field=f"{where}.{name}") from exc
        except CELParseError as exc:
            raise DomainError(
                f"invalid CEL: {str(exc).splitlines()[0]}", field=f"{where}.{name}"
            ) from exc
        out.append(Predicate(name=name, source=source, program=program))
    return tuple(out)


def _oracle(value: Any, where: str) -> tuple[str | None, tuple[Predicate, ...], dict[str, str]]:
    if not isinstance(value, dict):
        raise DomainError("expected {function} or {expressions}", field=where)
    unknown = set(value) - {"function", "expressions", "rules"}
    if unknown:
        raise DomainError(
            "unknown option (known: function, expressions, rules)",
            field=f"{where}.{sorted(unknown)[0]}",
        )
    if ("function" in value) == ("expressions" in value):
        raise DomainError("give exactly one of function or expressions", field=where)
    function = None
    expressions: tuple[Predicate, ...] = ()
    if "function" in value:
        function = _string(value["function"], f"{where}.function", "a registered oracle's name")
        registry_get(name=function, kind="oracle", field=f"{where}.function")
    else:
        expressions = _predicates(value["expressions"], f"{where}.expressions", key_label="field")
    rules = value.get("rules", {})
    if not isinstance(rules, dict):
        raise DomainError("expected an object of field: rule name", field=f"{where}.rules")
    for field, rule in rules.items():
        _path(field, f"{where}.rules")
        if not isinstance(rule, str) or not _NAME_RE.match(rule):
            raise DomainError(
                f"expected a rule name (an identifier), got {value_shown(rule)}",
                field=f"{where}.rules.{field}",
            )
    return function, expressions, dict(rules)


def _item_schema(schema: dict, items_path: tuple[str, ...]) -> dict | None:
    """The schema of one item (``properties`` along the items path, then ``items``) or None."""
    node: Any = schema
    for part in items_path:
        node = node.get("properties", {}).get(part) if isinstance(node, dict) else None
    node = node.get("items") if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def _schema_paths(schema: Any, prefix: str = "") -> list[str]:
    """Every dotted path of ``properties`` a schema declares, at any depth."""
    out: list[str] = []
    properties = schema.get("properties") if isinstance(schema, dict) else None
    for name, sub in (properties or {}).items():
        path = f"{prefix}{name}"
        out.append(path)
        out.extend(_schema_paths(sub, f"{path}."))
    return out


def _rules_check(
    rules: dict[str, str],
    *,
    expressions: tuple[Predicate, ...],
    item_schema: dict | None,
    where: str,
) -> None:
    """Refuse a rule naming a field the oracle never produces (module doc), naming the
    rule and the field, with the closest known path when one is close."""
    known = _schema_paths(item_schema)
    names = [p.name for p in expressions]
    for field, rule in rules.items():
        if expressions:
            # A nested path under an expression is checked against the items' schema.
            head = field.split(".")[0]
            produced = head in names and ("." not in field or not known or field in known)
            candidates = [*names, *(k for k in known if k.split(".")[0] in names)]
        else:
            if not known:
                raise DomainError(
                    f"rule {rule!r} names {field!r}, but the items' schema declares no "
                    "properties, so no field of the oracle can be checked: declare them",
                    field=f"{where}.rules.{field}",
                )
            produced, candidates = field in known, known
        if produced:
            continue
        close = difflib.get_close_matches(field, candidates, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f" (known: {sorted(candidates)})"
        raise DomainError(
            f"rule {rule!r} names {field!r}, a field the oracle never produces{hint}",
            field=f"{where}.rules.{field}",
        )


def _provenance(value: Any, where: str) -> tuple[str, frozenset[str]]:
    if not isinstance(value, dict) or set(value) != {"field", "allowed"}:
        raise DomainError("expected {field, allowed}", field=where)
    field = _string(value["field"], f"{where}.field")
    allowed = _names(value["allowed"], f"{where}.allowed")
    if not allowed:
        raise DomainError("the allowlist must not be empty", field=f"{where}.allowed")
    return field, frozenset(allowed)


def _source_version(value: Any, where: str) -> tuple[tuple[str, ...], str]:
    if not isinstance(value, dict) or set(value) != {"field", "current"}:
        raise DomainError("expected {field, current}", field=where)
    path = _path(_string(value["field"], f"{where}.field"), f"{where}.field")
    return path, _string(value["current"], f"{where}.current")


def contract_parse(config: dict, where: str = "config") -> Contract:
    """Parse and check a contract grader's ``config``: the schema against Draft 2020-12, every CEL
    expression compiled, the oracle looked up. Raises ``DomainError`` naming
    ``<where>.<option>``."""
    for name in config:
        if name not in OPTIONS:
            raise DomainError(
                f"unknown option for contract (known: {sorted(OPTIONS)})", field=f"{where}.{name}"
            )
    for name in REQUIRED:
        if name not in config:
            raise DomainError("required for contract", field=f"{where}.{name}")
    schema = config["schema"]
    if not isinstance(schema, dict):
        raise DomainError("expected a JSON Schema object", field=f"{where}.schema")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise DomainError(f"invalid JSON Schema: {exc.message}", field=f"{where}.schema") from exc
    items_path = _path(config["items"], f"{where}.items")
    id_field = _string(config["id_field"], f"{where}.id_field")
    function, expressions, rules = _oracle(config["oracle"], f"{where}.oracle")
    _rules_check(
        rules,
        expressions=expressions,
        item_schema=_item_schema(schema, items_path),
        where=f"{where}.oracle",
    )
    coverage: tuple[Predicate, ...] = ()
    if "coverage" in config:
        coverage = _predicates(config["coverage"], f"{where}.coverage", key_label="category")
    names = [p.name for p in coverage]
    required = names
    if "required_coverage" in config:
        required = list(_names(config["required_coverage"], f"{where}.required_coverage"))
        for i, name in enumerate(required):
            if name not in names:
                raise DomainError(
                    f"unknown category {name!r} (declared: {names})",
                    field=f"{where}.required_coverage[{i}]",
                )
    provenance_field: str | None = None
    allowed: frozenset[str] = frozenset()
    if "provenance" in config:
        provenance_field, allowed = _provenance(config["provenance"], f"{where}.provenance")
    version_path: tuple[str, ...] = ()
    current: str | None = None
    if "source_version" in config:
        version_path, current = _source_version(config["source_version"], f"{where}.source_version")
    review = _names(config.get("review", []), f"{where}.review")
    return Contract(
        schema=schema,
        items_path=items_path,
        id_field=id_field,
        oracle_function=function,
        expressions=expressions,
        rules=rules,
        coverage=coverage,
        required_coverage=tuple(required),
        provenance_field=provenance_field,
        allowed_sources=allowed,
        version_path=version_path,
        current_version=current,
        review=review,
    )


@functools.lru_cache(maxsize=64)
def _contract_cached(config_json: str) -> Contract:
    return contract_parse(json.loads(config_json))


def contract_from_config(config: dict) -> Contract:
    """``contract_parse`` of a stored config, cached on its canonical JSON so a run's trials compile
    once. Keys are sorted, since PostgreSQL's jsonb reorders them. Raises ``DomainError``."""
    return _contract_cached(json.dumps(config, sort_keys=True))
