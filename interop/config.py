"""Config as code: suites, judge versions, target and grader set presets and experiments
declared in one TOML file (``manage.py apply_config``), applied all or nothing. The format,
with a tested example: docs/config.md.

An ``[experiments.NAME]`` table declares an experiment; applying the file checks it (its
suite, presets, targets and graders) but starts nothing: ``manage.py run_experiment FILE
NAME`` applies the file and starts it (``config_experiment_start``), so applying a file
twice never starts runs. Errors name ``experiments.<name>.variants[<i>].target.<field>``.

Applying a file twice changes nothing; a changed judge makes a new version, a changed
preset is updated (runs keep their snapshot). Errors name ``suites.<name>.cases[<i>].<field>``,
``judges[<i>].<field>``, ``targets.<name>.<field>`` or
``grader_sets.<name>.graders[<i>].<field>``. A judge grader's ``judge_version`` is stored as
the UUID it resolves to, so a fresh database needs no ids.
"""

from __future__ import annotations

import datetime
import json
import math
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

from django.db import transaction

from core.bounds import CONFIG_FILE_MAX_BYTES, int_digits_plain
from core.errors import DomainError
from core.strict_json import (
    JSON_MAX_DEPTH,
    contains_non_finite,
    json_loads_line,
    nesting_path_past,
)
from core.text import unstorable_refuse
from evals.cases import CaseSpec, case_spec_parse, suite_config_apply
from evals.experiments.spec import experiment_spec_check, experiment_spec_start
from evals.models import Experiment, Suite
from evals.presets import grader_set_preset_apply, target_preset_apply
from judges.versions import judge_version_create

TABLES = ("suites", "judges", "targets", "grader_sets", "experiments")
JUDGE_FIELDS = {
    "name",
    "kind",
    "model",
    "base_url",
    "prompt_template",
    "threshold",
    "params",
    "output_schema",
}


def _judge_args(raw: object, index: int) -> dict:
    where = f"judges[{index}]"
    if not isinstance(raw, dict):
        raise DomainError("expected a table", field=where)
    unknown = sorted(set(raw) - JUDGE_FIELDS)
    if unknown:
        raise DomainError("unknown field", field=f"{where}.{unknown[0]}")
    for name in ("name", "kind", "model", "base_url"):
        if not isinstance(raw.get(name), str):
            raise DomainError("required, a string", field=f"{where}.{name}")
    threshold = raw.get("threshold")
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, int | float)
    ):
        raise DomainError("expected a number", field=f"{where}.threshold")
    return {
        "judge_name": raw["name"],
        "kind": raw["kind"],
        "model": raw["model"],
        "base_url": raw["base_url"],
        "prompt_template": raw.get("prompt_template", ""),
        "params": raw.get("params", {}),
        "output_schema": raw.get("output_schema", {}),
        "threshold": None if threshold is None else float(threshold),
    }


def _named_tables(config: dict, table: str) -> dict[str, dict]:
    """``[targets.NAME]`` / ``[grader_sets.NAME]`` tables, checked to be tables."""
    raw = config.get(table, {})
    if not isinstance(raw, dict):
        raise DomainError(f"expected tables ([{table}.NAME])", field=table)
    for name, value in raw.items():
        if not isinstance(value, dict):
            raise DomainError("expected a table", field=f"{table}.{name}")
    return raw


def _suite_cases(name: str, config: dict, base_dir: Path | None) -> list[CaseSpec]:
    where = f"suites.{name}"
    if "cases" in config and "cases_file" in config:
        raise DomainError("give cases or cases_file, not both", field=f"{where}.cases_file")
    if "cases_file" not in config:
        raw = config.get("cases", [])
        if not isinstance(raw, list):
            raise DomainError("expected an array of tables", field=f"{where}.cases")
        return [case_spec_parse(item, f"{where}.cases[{i}]") for i, item in enumerate(raw)]
    relative = config["cases_file"]
    if not isinstance(relative, str) or not relative:
        raise DomainError("expected a path", field=f"{where}.cases_file")
    path = (base_dir or Path.cwd()) / relative
    try:
        lines = _text_lines(path)
        specs = _cases_file_specs(lines, where)
    except (OSError, UnicodeDecodeError) as exc:
        raise DomainError(f"cannot read {path}: {exc}", field=f"{where}.cases_file") from exc
    return specs


def _text_lines(path: Path) -> Iterator[str]:
    """The lines of the UTF-8 text file at ``path``, read one at a time."""
    with path.open(encoding="utf-8", newline=None) as handle:
        yield from handle


def _cases_file_specs(lines: Iterable[str], where: str) -> list[CaseSpec]:
    specs = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where_line = f"{where}.cases_file:{number}"
        try:
            item = json_loads_line(line)
        except (ValueError, json.JSONDecodeError) as exc:
            raise DomainError(f"not JSON: {exc}", field=where_line) from exc
        if contains_non_finite(item):
            raise DomainError("NaN/Infinity is not valid JSON", field=where_line)
        specs.append(case_spec_parse(item, where_line))
    return specs


NESTED = f"nested too deeply (more than {JSON_MAX_DEPTH} arrays/tables inside each other)"


def _toml_nesting_line(text: str) -> int:
    """The line where ``text``'s brackets first nest past ``JSON_MAX_DEPTH`` (roughly: for the
    message), or the last line."""
    depth, quote, line, comment = 0, "", 1, False
    for char in text:
        if char == "\n":
            line, comment = line + 1, False
        elif comment:
            continue
        elif quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#":
            comment = True
        elif char in "[{":
            depth += 1
            if depth > JSON_MAX_DEPTH:
                return line
        elif char in "]}":
            depth -= 1
    return line


def _toml_long_key_line(text: str) -> int | None:
    """The first line whose key has more than ``JSON_MAX_DEPTH`` dotted parts, or None. Checked
    before parsing: the TOML parser keeps every prefix of a dotted key, so memory grows with its
    square (5,000 parts took 160 MB). Rough: multi-line strings are read as key lines too."""
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.lstrip()
        end = line.find("]") if line.startswith("[") else line.find("=")
        if end > JSON_MAX_DEPTH and line.count(".", 0, end) >= JSON_MAX_DEPTH:
            return number
    return None


def config_document_read(path: Path) -> dict:
    """The TOML document at ``path`` as a dict. Raises ``DomainError`` naming the file: over
    ``CONFIG_FILE_MAX_BYTES`` (1 MiB, before parsing), nesting past ``JSON_MAX_DEPTH`` (with the
    line, never a ``RecursionError``), not TOML (``ValueError``'s message), unreadable
    (``OSError``)."""
    with path.open("rb") as handle:
        data = handle.read(CONFIG_FILE_MAX_BYTES + 1)
    if len(data) > CONFIG_FILE_MAX_BYTES:
        raise DomainError(
            f"over the limit of {CONFIG_FILE_MAX_BYTES:,} bytes for a config file: keep a "
            "large suite's cases in a cases_file (JSONL)",
            field=str(path),
            code="too_large",
        )
    text = data.decode("utf-8")  # UnicodeDecodeError is a ValueError
    line = _toml_long_key_line(text)
    try:
        if line is not None:
            raise RecursionError  # the same refusal, before the parser tries
        return tomllib.loads(text)
    except RecursionError:
        line = line or _toml_nesting_line(text)
        raise DomainError(
            NESTED, field=str(path), record=f"line {line}", detail=f"{path}: line {line}: {NESTED}"
        ) from None
    except ValueError as exc:
        raise ValueError(int_digits_plain(str(exc))) from None


def _non_json_refuse(value: object, where: str) -> None:
    """Refuse TOML's ``nan``, ``inf``, dates and times, which JSON (what every table becomes)
    cannot hold, naming where."""
    if isinstance(value, float) and not math.isfinite(value):
        raise DomainError("NaN and Infinity are not allowed: give a number", field=where)
    if isinstance(value, datetime.date | datetime.time):  # datetime is a date
        raise DomainError(
            "a TOML date or time has no JSON form: quote it to give a string", field=where
        )
    if isinstance(value, dict):
        for key, item in value.items():
            _non_json_refuse(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _non_json_refuse(item, f"{where}[{index}]")


@transaction.atomic
def config_apply(*, document: dict, base_dir: Path | None = None) -> dict[str, list[dict]]:
    """Apply a parsed config document (``suites``, ``judges``, ``targets``, ``grader_sets``, in
    that order, then check ``experiments`` without starting them) all or nothing;
    ``base_dir``: where ``cases_file`` paths are read from.

    Returns ``{"suites": [{"name", "uuid", "action", "cases": {...}}], "judges": [{"judge",
    "version", "name" (``JUDGE:vN``), "uuid", "action", "trusted"}], "targets": [{"name",
    "action", "content_hash"}], "grader_sets": [...]}``, actions "created", "unchanged" or
    "updated"; ``"experiments": [{"name", "suite", "action": "declared"}]`` (started by
    ``config_experiment_start``). Raises ``DomainError`` naming the entry's field (module
    docstring); nothing is written then."""
    deep = nesting_path_past(document)
    if deep is not None:  # dotted keys nest without brackets; the walks below recurse
        raise DomainError(NESTED, field=deep)
    unstorable_refuse(document)
    _non_json_refuse(document, "")
    extra = sorted(set(document) - set(TABLES))
    if extra:
        raise DomainError(f"unknown table ({', '.join(TABLES)})", field=extra[0])
    suites = []
    for name, value in _named_tables(document, "suites").items():
        cases = _suite_cases(name, value, base_dir)
        settings = {k: v for k, v in value.items() if k not in ("cases", "cases_file")}
        suites.append(suite_config_apply(name=name, config=settings, cases=cases))
    targets = _named_tables(document, "targets")
    grader_sets = _named_tables(document, "grader_sets")
    entries = document.get("judges", [])
    if not isinstance(entries, list):
        raise DomainError("expected an array of tables ([[judges]])", field="judges")
    judges = []
    for index, raw in enumerate(entries):
        try:
            version, created = judge_version_create(**_judge_args(raw, index))
        except DomainError as exc:
            if exc.field.startswith("judges["):
                raise
            raise DomainError(
                exc.message, field=f"judges[{index}].{exc.field}", code=exc.code
            ) from exc
        judges.append(
            {
                "judge": version.judge.name,
                "version": version.number,
                "name": f"{version.judge.name}:v{version.number}",
                "uuid": str(version.uuid),
                "action": "created" if created else "unchanged",
                "trusted": version.is_trusted,
            }
        )
    out: dict[str, list[dict]] = {
        "suites": suites,
        "judges": judges,
        "targets": [],
        "grader_sets": [],
    }
    for name, value in targets.items():
        target, action = target_preset_apply(name=name, config=value)
        out["targets"].append({"name": name, "action": action, "content_hash": target.content_hash})
    for name, value in grader_sets.items():
        unknown = sorted(set(value) - {"graders"})
        if unknown:
            raise DomainError("unknown field (graders)", field=f"grader_sets.{name}.{unknown[0]}")
        if "graders" not in value:
            raise DomainError("required, a list of graders", field=f"grader_sets.{name}.graders")
        grader_set, action = grader_set_preset_apply(name=name, graders=value["graders"])
        out["grader_sets"].append(
            {"name": name, "action": action, "content_hash": grader_set.content_hash}
        )
    out["experiments"] = [
        {"name": name, "suite": _experiment_suite(name, value).name, "action": "declared"}
        for name, value in _named_tables(document, "experiments").items()
    ]
    return out


def _experiment_suite(name: str, spec: dict) -> Suite:
    """The suite ``[experiments.<name>]`` names (by name: in the file or already here), its
    table checked (``experiment_spec_check``). Raises ``DomainError`` under the table."""
    where = f"experiments.{name}"
    experiment_spec_check(spec=spec, prefix=where)
    suite = Suite.objects.filter(name=spec["suite"]).first()
    if suite is None:
        raise DomainError(
            f"no suite named {spec['suite'][:100]!r}: declare it under [suites] or create it",
            field=f"{where}.suite",
        )
    return suite


@transaction.atomic
def config_experiment_start(
    *, document: dict, name: str, base_dir: Path | None = None, started_by=None
) -> Experiment:
    """Apply ``document`` (``config_apply``) and start its experiment ``name``
    (``[experiments.<name>]``, the table's name the experiment's), in one transaction: a
    refused start leaves nothing of the file applied either.

    Raises ``DomainError``: no such table (on ``experiments.<name>``), anything
    ``config_apply`` refuses, and what the start refuses, named under the table
    (``experiments.<name>.variants[1].target.model``); a started name is a ``conflict``."""
    config_apply(document=document, base_dir=base_dir)
    tables = _named_tables(document, "experiments")
    if name not in tables:
        declared = ", ".join(sorted(tables)) or "none"
        raise DomainError(
            f"the file declares no experiment {name[:100]!r} (declared: {declared})",
            field=f"experiments.{name[:100]}",
            code="not_found",
        )
    spec = dict(tables[name])
    suite = _experiment_suite(name, spec)
    spec["name"] = name
    del spec["suite"]
    return experiment_spec_start(
        spec=spec, suite=suite, started_by=started_by, prefix=f"experiments.{name}"
    )
