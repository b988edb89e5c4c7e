"""``manage.py apply_config FILE [--json]``: apply a config file (``interop.config``: its
format, rules and errors). Each judge line names the version it created or found, as
``JUDGE:vN`` and by UUID: the names ``judge_run`` (and every command taking a judge version)
accepts."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import CommandError

from core.commands import DomainCommand
from interop.config import config_apply, config_document_read


class Command(DomainCommand):
    help = (
        "Apply suites (with their cases), judge versions, targets and grader sets declared in "
        "a TOML file (idempotent; docs/config.md)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options) -> None:
        try:
            document = config_document_read(Path(options["file"]))
        except (OSError, ValueError) as exc:  # TOML syntax (a raw NUL), invalid UTF-8
            raise CommandError(f"{options['file']}: {exc}") from exc
        applied = config_apply(document=document, base_dir=Path(options["file"]).resolve().parent)
        if options["json"]:
            self.stdout.write(json.dumps(applied, allow_nan=False))
            return
        for r in applied["suites"]:
            c = r["cases"]
            counts = ", ".join(f"{n} {what.replace('_', ' ')}" for what, n in c.items() if n)
            self.stdout.write(f"suite {r['name']}: {r['action']} ({counts or 'no cases'})")
        for r in applied["judges"]:
            what = (
                f"new version {r['version']} (untrusted)"
                if r["action"] == "created"
                else f"unchanged (version {r['version']})"
            )
            self.stdout.write(f"judge {r['judge']}: {what}; {r['name']} = {r['uuid']}")
        for table, label in (("targets", "target"), ("grader_sets", "grader set")):
            for r in applied[table]:
                what = {
                    "created": "created",
                    "unchanged": "unchanged",
                    "updated": "updated (runs keep their own snapshot)",
                }[r["action"]]
                self.stdout.write(f"{label} {r['name']}: {what}")
