"""``manage.py import_run FILE [--suite NAME] [--name RUN]``: read an ``export_run`` file back
into a run (all or nothing; ``interop.run_file.run_import``)."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import CommandError
from django.db import IntegrityError

from core.commands import DomainCommand
from evals.run_status import run_trial_count
from interop.importers.context import retired_sentence
from interop.run_file import run_import


class Command(DomainCommand):
    def domain_error_text(self, error, options) -> str:
        return f"{options['file']}: {error}"

    help = "Import a run written by export_run."

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--suite", help="suite to import into (default: the file's)")
        parser.add_argument("--name", help="run name (default: the file's)")

    def handle(self, *args, **options) -> None:
        path = Path(options["file"])
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"), parse_constant=_refuse_constant)
        except (OSError, ValueError) as exc:
            raise CommandError(f"{path}: cannot read ({exc})") from exc
        except RecursionError as exc:
            raise CommandError(f"{path}: cannot read (JSON nested too deeply)") from exc
        try:
            retired: list[str] = []
            run = run_import(
                data=data, suite_name=options["suite"], name=options["name"], retired=retired
            )
        except IntegrityError as exc:
            raise CommandError(f"{path}: inconsistent data ({exc}); nothing was imported") from exc
        count = run_trial_count(run)
        partial = f"; {count.partial_text}" if count.partial else ""
        self.stdout.write(
            f"imported {run.suite.name}/{run.ref_text}: {count.summary}{partial}"
            + (f". {retired_sentence(retired)}" if retired else "")
        )


def _refuse_constant(token: str):
    raise ValueError(f"non-finite number {token} is not strict JSON")
