"""``manage.py user_create USERNAME --role ROLE [--superuser] [--password-from-env VAR]``:
the first user (or any other), with a role, every grant recorded (``core.grants``)."""

from __future__ import annotations

import getpass
import os
import sys
from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.commands import DomainCommand
from core.grants import COMMAND, user_create
from core.roles import ROLES


class Command(DomainCommand):
    help = (
        "Create a user with a role (--superuser: also staff and superuser, for the admin). "
        "The password is read from the variable --password-from-env names, else asked twice."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=ROLES)
        parser.add_argument("--superuser", action="store_true")
        parser.add_argument(
            "--password-from-env",
            metavar="VAR",
            help="read the password from this environment variable (never from the command "
            "line, where other users and the shell history see it)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = user_create(
            username=options["username"],
            password=self._password(options["password_from_env"]),
            role=options["role"],
            superuser=options["superuser"],
            by=None,
            via=COMMAND,
        )
        extra = ", staff and superuser" if user.is_superuser else ""
        self.stdout.write(f"created {user.username} ({options['role']}{extra})")

    def _password(self, variable: str | None) -> str:
        if variable:
            value = os.environ.get(variable)
            if not value:
                raise CommandError(f"password-from-env: {variable} is not set or empty")
            return value
        if not sys.stdin.isatty():
            raise CommandError(
                "password-from-env: no terminal to ask the password on; name a variable"
            )
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("password: the two passwords differ")
        return first
