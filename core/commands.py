"""Management commands' one mapping of a ``DomainError``: the message on stderr and the
command's own exit code (``domain_error_exit``, 1 unless the command says otherwise: the
gate's bad input is 3, because 1 means "regression")."""

from __future__ import annotations

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
            raise CommandError(
                self.domain_error_text(exc, options), returncode=self.domain_error_exit
            ) from exc
