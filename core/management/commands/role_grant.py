"""``manage.py role_grant USERNAME ROLE``: give a user a role (``core.grants.role_grant``,
recorded as done from the command line)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError, CommandParser

from core.commands import DomainCommand
from core.grants import COMMAND, role_grant, role_revoke
from core.roles import ROLES


class Command(DomainCommand):
    help = "Give USERNAME the role ROLE (reviewer, engineer, lead); recorded with when."
    service = staticmethod(role_grant)
    done, unchanged = "granted", "already has"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("role", choices=ROLES)

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"username: no user named {options['username']!r}")
        role = options["role"]
        changed = self.service(user=user, role=role, by=None, via=COMMAND)
        if changed:
            self.stdout.write(f"{role} {self.done} for {user.username}")
        else:
            self.stdout.write(f"{user.username} {self.unchanged} the role {role}: nothing changed")


class RevokeCommand(Command):
    help = "Take the role ROLE from USERNAME; recorded with when."
    service = staticmethod(role_revoke)
    done, unchanged = "revoked", "does not have"
