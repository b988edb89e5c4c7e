"""``manage.py export_run RUN --out FILE [--no-outputs]``: a run as a JSON baseline file.

RUN is a run UUID, "suite name/run name" or a unique run name. The file (format ``assay-run``, see
``interop.run_file``) is strict JSON and is read back by ``import_run`` and by ``gate``.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evals.selectors import run_lookup
from interop.run_file import run_export_json


class Command(BaseCommand):
    help = "Write a run (cases with content hashes, trials, grades) as a JSON baseline file."

    def add_arguments(self, parser):
        parser.add_argument("run", help="run UUID or 'suite name/run name'")
        parser.add_argument("--out", required=True, help="file to write ('-' for stdout)")
        parser.add_argument(
            "--no-outputs", action="store_true", help="leave trial output text out (a smaller file)"
        )

    def handle(self, *args, **options):
        run = run_lookup(options["run"])
        if not run.is_terminal:
            raise CommandError(f"run {run.ref_text} is {run.status}: export a finished run")
        text = run_export_json(run=run, outputs=not options["no_outputs"])
        if options["out"] == "-":
            self.stdout.write(text)
            return
        try:
            Path(options["out"]).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"--out: cannot write {options['out']}: {exc.strerror}") from exc
        self.stdout.write(f"wrote {options['out']} (run {run.ref_text} of suite {run.suite.name})")
