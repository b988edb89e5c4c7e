"""``manage.py role_revoke USERNAME ROLE``: take a role from a user
(``core.grants.role_revoke``, recorded as done from the command line)."""

from core.management.commands.role_grant import RevokeCommand as Command

__all__ = ["Command"]
