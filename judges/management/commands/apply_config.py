"""``manage.py apply_config FILE [--json]``: declare judge versions in a TOML file.

Format (``tomllib``)::

    [[judges]]
    name = "helpfulness"
    kind = "rubric"                 # rubric | pairwise | faithfulness | ...
    model = "gpt-4o-mini"
    base_url = "https://api.openai.com/v1"
    prompt_template = "..."         # optional: the kind's default
    threshold = 0.7                 # optional
    [judges.params]                 # optional: temperature, max_tokens, criteria, ...
    temperature = 0
    [judges.output_schema]          # optional: the kind's default

Applying the same file twice changes nothing ("unchanged"); a changed judge makes a new
version and says so ("new version N"). Other top-level tables (``targets``,
``grader_sets``) are refused for now with an error naming them. Errors name
``judges[<index>].<field>``; nothing is applied when any entry is invalid.
"""

from __future__ import annotations

import json
import tomllib

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from judges.services import JudgeConfigError, judge_version_create

FIELDS = {"name", "kind", "model", "base_url", "prompt_template", "threshold", "params",
          "output_schema"}


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
    if threshold is not None and (isinstance(threshold, bool)
                                  or not isinstance(threshold, int | float)):
        raise CommandError(f"{where}.threshold: expected a number")
    return {
        "judge_name": raw["name"], "kind": raw["kind"], "model": raw["model"],
        "base_url": raw["base_url"], "prompt_template": raw.get("prompt_template", ""),
        "params": raw.get("params", {}), "output_schema": raw.get("output_schema", {}),
        "threshold": None if threshold is None else float(threshold),
    }


class Command(BaseCommand):
    help = "Apply judge versions declared in a TOML file (idempotent)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options) -> None:
        try:
            with open(options["file"], "rb") as handle:
                config = tomllib.load(handle)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise CommandError(f"{options['file']}: {exc}") from exc
        extra = sorted(set(config) - {"judges"})
        if extra:
            raise CommandError(f"{extra[0]}: not supported by apply_config yet (judges only)")
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
                    except JudgeConfigError as exc:
                        raise CommandError(f"judges[{index}].{exc}") from exc
                    results.append({
                        "judge": version.judge.name, "version": version.number,
                        "uuid": str(version.uuid),
                        "action": "created" if created else "unchanged",
                        "trusted": version.is_trusted,
                    })
        except CommandError:
            raise
        if options["json"]:
            self.stdout.write(json.dumps({"judges": results}, allow_nan=False))
            return
        for r in results:
            what = (f"new version {r['version']} (untrusted)" if r["action"] == "created"
                    else f"unchanged (version {r['version']})")
            self.stdout.write(f"judge {r['judge']}: {what}")
