"""Config as code: judge versions, targets and grader sets declared in one document (a TOML
file kept in the repository, read by ``manage.py apply_config``), applied all or nothing.

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

from django.db import transaction

from core.errors import DomainError
from core.text import unstorable_refuse
from evals.presets import grader_set_preset_apply, target_preset_apply
from judges.versions import judge_version_create

TABLES = ("judges", "targets", "grader_sets")
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


@transaction.atomic
def config_apply(*, document: dict) -> dict[str, list[dict]]:
    """Apply a config document (the parsed TOML: tables ``judges``, ``targets``,
    ``grader_sets``) all or nothing.

    Returns ``{"judges": [{"judge", "version", "name" (``JUDGE:vN``, as
    ``judges.selectors.judge_version_resolve`` reads it), "uuid", "action" ("created" |
    "unchanged"), "trusted"}], "targets": [{"name", "action" ("created" | "unchanged" | "updated"),
    "content_hash"}], "grader_sets": [...]}``. Idempotent: the same document twice changes
    nothing. Raises ``DomainError`` naming ``judges[<i>].<field>``, ``targets.<name>.<field>``
    or ``grader_sets.<name>.<field>`` (also for a ``\\u0000`` escape: ``core.text``);
    nothing is written then.
    """
    unstorable_refuse(document)
    extra = sorted(set(document) - set(TABLES))
    if extra:
        raise DomainError("unknown table (judges, targets, grader_sets)", field=extra[0])
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
            raise DomainError(exc.message, field=f"judges[{index}].{exc.field}") from exc
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
    out: dict[str, list[dict]] = {"judges": judges, "targets": [], "grader_sets": []}
    for name, value in targets.items():
        preset, action = target_preset_apply(name=name, config=value)
        out["targets"].append({"name": name, "action": action, "content_hash": preset.content_hash})
    for name, value in grader_sets.items():
        unknown = sorted(set(value) - {"graders"})
        if unknown:
            raise DomainError("unknown field (graders)", field=f"grader_sets.{name}.{unknown[0]}")
        if "graders" not in value:
            raise DomainError("required, a list of graders", field=f"grader_sets.{name}.graders")
        preset, action = grader_set_preset_apply(name=name, graders=value["graders"])
        out["grader_sets"].append(
            {"name": name, "action": action, "content_hash": preset.content_hash}
        )
    return out
