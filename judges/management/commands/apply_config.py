"""``manage.py apply_config FILE [--json]``: declare judge versions, targets and grader
sets in a TOML file.

Format (``tomllib``)::

    [[judges]]
    name = "helpfulness"
    kind = "rubric"                 # rubric | pairwise | faithfulness | ...
    model = "gpt-4o-mini"
    base_url = "https://api.openai.com/v1"
    prompt_template = "Judge $output against $criteria"  # optional: the kind's default
    threshold = 0.7                 # optional
    [judges.params]                 # optional: temperature, max_tokens, criteria, ...
    temperature = 0
    [judges.output_schema]          # optional: the kind's default

    [targets.prod]                  # a named target preset: a run's target snapshot
    kind = "openai"
    base_url = "https://api.example.com/v1"
    model = "m"
    prompt_template = "Answer: $input"

    [grader_sets.smoke]             # a named grader set preset
    graders = [{ key = "exact", kind = "exact" }]

Prompt templates, of judges and targets, use ``$name`` placeholders (``$output``,
``$input``, ...; ``$$`` is a literal ``$``); ``{input}`` is refused, naming the entry's
``prompt_template``. Applying the same file twice changes nothing ("unchanged"); a changed
judge makes a new version and says so ("new version N"); a changed target or grader set
updates its preset and says so ("updated"; runs keep their own snapshot). Errors name
``judges[<index>].<field>``, ``targets.<name>.<field>`` or
``grader_sets.<name>.graders[<i>].<field>``; nothing is applied when any entry is invalid.
``run_suite --target-preset NAME --grader-set NAME`` uses the presets.
"""

from __future__ import annotations

import json
import tomllib

from django.core.management.base import CommandError
from django.db import transaction

from core.commands import DomainCommand
from core.errors import DomainError
from evals.presets import grader_set_preset_apply, target_preset_apply
from judges.versions import judge_version_create

FIELDS = {
    "name",
    "kind",
    "model",
    "base_url",
    "prompt_template",
    "threshold",
    "params",
    "output_schema",
}


def _entry(raw: object, index: int) -> dict:
    where = f"judges[{index}]"
    if not isinstance(raw, dict):
        raise CommandError(f"{where}: expected a table")
    unknown = sorted(set(raw) - FIELDS)
    if unknown:
        raise CommandError(f"{where}.{unknown[0]}: unknown field")
    for name in ("name", "kind", "model", "base_url"):
        if not isinstance(raw.get(name), str):
            raise CommandError(f"{where}.{name}: required, a string")
    threshold = raw.get("threshold")
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, int | float)
    ):
        raise CommandError(f"{where}.threshold: expected a number")
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


class Command(DomainCommand):
    help = "Apply judge versions, targets and grader sets declared in a TOML file (idempotent)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options) -> None:
        try:
            with open(options["file"], "rb") as handle:
                config = tomllib.load(handle)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise CommandError(f"{options['file']}: {exc}") from exc
        extra = sorted(set(config) - {"judges", "targets", "grader_sets"})
        if extra:
            raise CommandError(f"{extra[0]}: unknown table (judges, targets, grader_sets)")
        targets, grader_sets = (
            _named_tables(config, "targets"),
            _named_tables(config, "grader_sets"),
        )
        entries = config.get("judges", [])
        if not isinstance(entries, list):
            raise CommandError("judges: expected an array of tables ([[judges]])")
        results = []
        try:
            with transaction.atomic():
                for index, raw in enumerate(entries):
                    args = _entry(raw, index)
                    try:
                        version, created = judge_version_create(**args)
                    except DomainError as exc:
                        raise CommandError(f"judges[{index}].{exc}") from exc
                    results.append(
                        {
                            "judge": version.judge.name,
                            "version": version.number,
                            "uuid": str(version.uuid),
                            "action": "created" if created else "unchanged",
                            "trusted": version.is_trusted,
                        }
                    )
                presets = _presets_apply(targets, grader_sets)
        except CommandError:
            raise
        if options["json"]:
            self.stdout.write(json.dumps({"judges": results, **presets}, allow_nan=False))
            return
        for r in results:
            what = (
                f"new version {r['version']} (untrusted)"
                if r["action"] == "created"
                else f"unchanged (version {r['version']})"
            )
            self.stdout.write(f"judge {r['judge']}: {what}")
        for table, label in (("targets", "target"), ("grader_sets", "grader set")):
            for r in presets[table]:
                what = {
                    "created": "created",
                    "unchanged": "unchanged",
                    "updated": "updated (runs keep their own snapshot)",
                }[r["action"]]
                self.stdout.write(f"{label} {r['name']}: {what}")


def _named_tables(config: dict, table: str) -> dict[str, dict]:
    """``[targets.NAME]`` / ``[grader_sets.NAME]`` tables, checked to be tables."""
    raw = config.get(table, {})
    if not isinstance(raw, dict):
        raise CommandError(f"{table}: expected tables ([{table}.NAME])")
    for name, value in raw.items():
        if not isinstance(value, dict):
            raise CommandError(f"{table}.{name}: expected a table")
    return raw


def _presets_apply(targets: dict[str, dict], grader_sets: dict[str, dict]) -> dict:
    out: dict[str, list[dict]] = {"targets": [], "grader_sets": []}
    for name, value in targets.items():
        preset, action = target_preset_apply(name=name, config=value)
        out["targets"].append({"name": name, "action": action, "content_hash": preset.content_hash})
    for name, value in grader_sets.items():
        unknown = sorted(set(value) - {"graders"})
        if unknown:
            raise CommandError(f"grader_sets.{name}.{unknown[0]}: unknown field (graders)")
        if "graders" not in value:
            raise CommandError(f"grader_sets.{name}.graders: required, a list of graders")
        preset, action = grader_set_preset_apply(name=name, graders=value["graders"])
        out["grader_sets"].append(
            {"name": name, "action": action, "content_hash": preset.content_hash}
        )
    return out
