"""Management commands' one mapping of a ``DomainError``: the message on stderr and the
command's own exit code (``domain_error_exit``, 1 unless the command says otherwise: the
gate's bad input is 3, because 1 means "regression"). A command run with ``--json`` also
prints the error on stdout as one JSON object, ``{"error": {"detail", "field", "record",
"code", ...}}`` (the API's shape, ``DomainError.as_dict``), so a script reading its stdout
as JSON gets JSON on failure too."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError


class DomainCommand(BaseCommand):
    """A command whose services' ``DomainError`` becomes ``CommandError(text,
    returncode=domain_error_exit)``; ``domain_error_text`` may prefix it (the file read)."""

    domain_error_exit = 1

    def domain_error_text(self, error: DomainError, options: dict) -> str:
        """The line printed for ``error`` ("field: message" by default)."""
        return str(error)

    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except DomainError as exc:
            if options.get("json"):
                body = {**exc.as_dict(), "code": exc.code}
                self.stdout.write(json.dumps({"error": body}, ensure_ascii=False, default=str))
            raise CommandError(
                self.domain_error_text(exc, options), returncode=self.domain_error_exit
            ) from exc
