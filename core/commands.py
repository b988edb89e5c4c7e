"""Management commands' one mapping of a ``DomainError``: the message on stderr, exit code
``domain_error_exit`` (1 unless the command says otherwise: the gate uses 3, as 1 means
"regression"); with ``--json`` also ``{"error": DomainError.as_dict()}`` on stdout."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError

from core.bounds import SEED_MAX, seed_problem
from core.errors import DomainError
from core.terminal import TerminalOutput


class DomainCommand(BaseCommand):
    """A command whose services' ``DomainError`` becomes ``CommandError`` with
    ``domain_error_exit``. Its output escapes control and bidi characters (``core.terminal``)."""

    domain_error_exit = 1

    def __init__(
        self,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        no_color: bool = False,
        force_color: bool = False,
    ) -> None:
        super().__init__(stdout, stderr, no_color=no_color, force_color=force_color)
        stderr_style = self.stderr.style_func  # BaseCommand's: ERROR on a terminal
        # The streams BaseCommand wrapped (its own defaults).
        self.stdout = TerminalOutput(stdout or sys.stdout)
        self.stderr = TerminalOutput(stderr or sys.stderr)
        self.stderr.style_func = stderr_style

    def domain_error_text(self, error: DomainError, options: dict[str, Any]) -> str:
        """The line printed for ``error`` ("field: message" by default)."""
        return str(error)

    def execute(self, *args: Any, **options: Any) -> str | None:
        # BaseCommand.execute wraps a given stdout/stderr in a plain OutputWrapper: wrap
        # them here instead.
        if options.get("stdout"):
            self.stdout = TerminalOutput(options.pop("stdout"))
        if options.get("stderr"):
            self.stderr = TerminalOutput(options.pop("stderr"))
        try:
            return super().execute(*args, **options)
        except DomainError as exc:
            if options.get("json"):
                body = {**exc.as_dict(), "code": exc.code}
                self.stdout.write(json.dumps({"error": body}, ensure_ascii=False, default=str))
            raise CommandError(
                self.domain_error_text(exc, options), returncode=self.domain_error_exit
            ) from exc


def seed_arg(text: str) -> int:
    """argparse ``type`` for ``--seed``: 0 to ``SEED_MAX``, else a plain usage error."""
    text = text.strip()
    if not text.isdigit() or len(text) > len(str(SEED_MAX)):
        raise argparse.ArgumentTypeError(f"expected a whole number from 0 to {SEED_MAX:,}")
    if problem := seed_problem(int(text)):
        raise argparse.ArgumentTypeError(problem)
    return int(text)
