"""A grader set read from outside (form, API, config file, preset): parsed strictly into
``GraderSpec`` at the edge (``parse_grader_specs``) and stored with each judge pinned to one
version (``grader_set_resolved``)."""

from __future__ import annotations

import math
from typing import Any

import regex

from core.errors import DomainError
from core.registry import registry_get
from evals.grading.agent.state import state_parse
from evals.grading.contract import OPTIONS as CONTRACT_OPTIONS
from evals.grading.grader_set import (
    JUDGE_KIND,
    RECORDED_KINDS,
    STATE_KIND,
    TRAJECTORY_KIND,
    GraderSpec,
    default_gating,
    recorded_kind_reason,
)
from evals.grading.graders import GRADERS, REGEX_FLAGS, parse_number, pattern_compile
from evals.grading.rungs import NO_JUDGE_RUNG, RUNG_KINDS, judge_rung

_SPEC_FIELDS = {"key", "kind", "config", "gating", "version"}


def _type_name(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _want(where: str, value: Any, kind: type | tuple, label: str) -> None:
    # bool is an int subclass: a strict check refuses True for a number and 1 for a bool.
    kinds = _as_tuple(kind)
    ok = object in kinds or (
        isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    )
    if not ok:
        raise DomainError(f"expected {label}, got {_type_name(value)}", field=f"{where}")


def _as_tuple(kind: type | tuple) -> tuple:
    return kind if isinstance(kind, tuple) else (kind,)


_OPTIONS: dict[str, dict[str, tuple[type | tuple, str]]] = {
    "exact": {"value": (object, "any JSON value")},
    "normalized": {"value": (object, "any JSON value")},
    "contains": {
        "value": (str, "a string"),
        "values": (list, "a list of strings"),
        "case_sensitive": (bool, "a boolean"),
        "word": (bool, "a boolean"),
        "match": (str, "'all' or 'any'"),
    },
    "not_contains": {
        "value": (str, "a string"),
        "values": (list, "a list of strings"),
        "case_sensitive": (bool, "a boolean"),
        "word": (bool, "a boolean"),
    },
    "regex": {
        "pattern": (str, "a string"),
        "flags": (list, "a list of flag names"),
        "must_match": (bool, "a boolean"),
    },
    "json_schema": {"schema": ((dict, bool), "a JSON Schema object")},
    "numeric": {
        "value": ((int, float, str), "a number"),
        "pattern": (str, "a string"),
        "abs_tol": ((int, float), "a number"),
        "rel_tol": ((int, float), "a number"),
    },
    "python": {"function": (str, "a registered grader's name")},
    "contract": dict.fromkeys(CONTRACT_OPTIONS, (object, "see docs/contracts.md")),
    # The agent kinds check their own options (evals.grading.agent): types here, the rest there.
    STATE_KIND: {
        "mode": (str, "'exact' or 'subset'"),
        "goal": (object, "any JSON value"),
        "ignore": (list, "a list of paths"),
    },
    TRAJECTORY_KIND: {
        "required": (list, "a list of tool names"),
        "forbidden": (list, "a list of tool names"),
        "order": (list, "a list of tool names"),
        "before": (list, "a list of [first, then] pairs"),
        "arguments": (list, 'a list of {"tool", "check", "name"?}'),
        "max_steps": (int, "a whole number"),
        "max_tokens": (int, "a whole number"),
        "max_cost_usd": ((int, float), "a number"),
    },
    JUDGE_KIND: {
        "judge_version": (str, "a judge version: UUID, JUDGE:vN or a judge name"),
        "judge": (str, "a judge name"),
        "judge_number": (int, "a whole number"),
        "skip_if_failed": (bool, "a boolean"),
    },
}
_REQUIRED = {
    "regex": ("pattern",),
    "json_schema": ("schema",),
    "python": ("function",),
}


def _check_config(kind: str, config: dict, where: str) -> None:
    options = _OPTIONS[kind]
    for name in config:
        if name not in options:
            raise DomainError(
                f"unknown option for {kind} (known: {sorted(options)})", field=f"{where}.{name}"
            )
    for name in _REQUIRED.get(kind, ()):
        if name not in config:
            raise DomainError(f"required for {kind}", field=f"{where}.{name}")
    for name, value in config.items():
        _want(f"{where}.{name}", value, *options[name])
    _check_values(kind, config, where)


def _check_values(kind: str, config: dict, where: str) -> None:
    if "values" in config:
        if "value" in config:
            raise DomainError("give value or values, not both", field=f"{where}.values")
        if not config["values"] or not all(isinstance(v, str) and v for v in config["values"]):
            raise DomainError("expected a non-empty list of strings", field=f"{where}.values")
    if kind in ("contains", "not_contains") and config.get("value") == "":
        raise DomainError("must not be empty", field=f"{where}.value")
    if config.get("match", "all") not in ("all", "any"):
        raise DomainError("expected 'all' or 'any'", field=f"{where}.match")
    for name in ("abs_tol", "rel_tol"):
        if name in config and not (math.isfinite(config[name]) and config[name] >= 0):
            raise DomainError("expected a finite number >= 0", field=f"{where}.{name}")
    if (
        kind == "numeric"
        and isinstance(config.get("value"), str)
        and (parse_number(config["value"]) is None)
    ):
        raise DomainError(f"not a number: {config['value']!r}", field=f"{where}.value")
    value = config.get("value")
    if kind == "numeric" and isinstance(value, float) and not math.isfinite(value):
        raise DomainError("expected a finite number", field=f"{where}.value")
    if kind in ("regex", "numeric") and "pattern" in config:
        flags = config.get("flags", [])
        for i, name in enumerate(flags):
            if not isinstance(name, str) or name.lower() not in REGEX_FLAGS:
                raise DomainError(f"unknown flag {name!r}", field=f"{where}.flags[{i}]")
        try:
            compiled = pattern_compile(config["pattern"], flags)
        except (regex.error, ValueError) as exc:
            raise DomainError(f"invalid regex: {exc}", field=f"{where}.pattern") from exc
        if kind == "numeric" and compiled.groups != 1:
            raise DomainError(
                f"needs exactly one capturing group, has {compiled.groups}",
                field=f"{where}.pattern",
            )
    if kind == "json_schema":
        import jsonschema  # noqa: PLC0415 - see the imports

        try:
            jsonschema.Draft202012Validator.check_schema(config["schema"])
        except jsonschema.SchemaError as exc:
            raise DomainError(
                f"invalid JSON Schema: {exc.message}", field=f"{where}.schema"
            ) from exc
    if kind == "contract":
        from evals.grading.contract.config import contract_parse  # noqa: PLC0415

        contract_parse(config, where)
    if kind == STATE_KIND:
        state_parse(config, where)
    if kind == TRAJECTORY_KIND:
        from evals.grading.agent.trajectory import trajectory_parse  # noqa: PLC0415

        trajectory_parse(config, where)
    if kind == "python":
        registry_get(name=config["function"], kind="grader", field=f"{where}.function")


def parse_grader_specs(raw: list[dict]) -> list[GraderSpec]:
    """Parse a grader set from JSON (``[{"key", "kind", "config"?, "gating"?, "version"?}]``).

    Strict: no coercion, unknown fields and options refused, keys unique, each kind's config
    fully checked (regex compiled, JSON Schema Draft 2020-12, oracle and judge version looked
    up). A grader of an imported run cannot be run and is refused saying so. Raises
    ``DomainError`` whose message starts with ``graders[<index>].<field>``."""
    if not isinstance(raw, list):
        raise DomainError(f"expected a list, got {type(raw).__name__}", field="graders")
    specs: list[GraderSpec] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(raw):
        where = f"graders[{index}]"
        if not isinstance(item, dict):
            raise DomainError(f"expected an object, got {type(item).__name__}", field=f"{where}")
        if item.get("kind") in RECORDED_KINDS:  # before its fields: a recorded grader has others
            raise DomainError(recorded_kind_reason(item["kind"]), field=f"{where}.kind")
        for name in item:
            if name not in _SPEC_FIELDS:
                raise DomainError("unknown field", field=f"{where}.{name}")
        for name in ("key", "kind"):
            if name not in item:
                raise DomainError("required", field=f"{where}.{name}")
            _want(f"{where}.{name}", item[name], str, "a string")
        key, kind = item["key"], item["kind"]
        if not key.strip():
            raise DomainError("must not be empty", field=f"{where}.key")
        if key in seen:
            raise DomainError(
                f"duplicate key {key!r} (also graders[{seen[key]}])", field=f"{where}.key"
            )
        seen[key] = index
        if kind not in GRADERS and kind not in RUNG_KINDS:
            raise DomainError(
                f"unknown kind {kind!r} (known: {sorted([*GRADERS, *RUNG_KINDS])})",
                field=f"{where}.kind",
            )
        rung = judge_rung() if kind == JUDGE_KIND else None
        if kind == JUDGE_KIND and rung is None:
            raise DomainError(NO_JUDGE_RUNG, field=f"{where}.kind")
        config = item.get("config", {})
        _want(f"{where}.config", config, dict, "an object")
        gating = item.get("gating", default_gating(kind))
        _want(f"{where}.gating", gating, bool, "a boolean")
        version = item.get("version", "1")
        _want(f"{where}.version", version, str, "a string")
        _check_config(kind, config, f"{where}.config")
        if rung is not None:  # a name is resolved now: the run snapshots the version's UUID
            uuid = rung.version_resolve(config=config, where=f"{where}.config")
            config = {**config, "judge_version": uuid}
        specs.append(GraderSpec(key=key, kind=kind, config=config, gating=gating, version=version))
    return specs


def grader_set_resolved(raw: list[dict], specs: list[GraderSpec]) -> list[dict]:
    """``raw`` as given with each judge grader's ``judge_version`` replaced by its resolved UUID
    (from ``specs``): what runs and presets store, so a judge is pinned to one version."""
    out = []
    for item, spec in zip(raw, specs, strict=True):
        if spec.is_judge:
            item = {
                **item,
                "config": {**item["config"], "judge_version": spec.config["judge_version"]},
            }
        if "gating" not in item and not spec.gating:
            item = {**item, "gating": False}  # a non-gating default, written down
        out.append(item)
    return out
