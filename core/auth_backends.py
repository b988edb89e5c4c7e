"""The session backend: the user and their roles in one query."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend

from core.roles import user_with_roles_get

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class RolesModelBackend(ModelBackend):
    """``ModelBackend`` whose ``get_user`` also reads the user's groups, so role checks on a
    page make no query of their own."""

    def get_user(self, user_id: int) -> User | None:
        """The user with roles read; None when absent or ``user_can_authenticate`` refuses them."""
        user_model = get_user_model()
        found = user_with_roles_get(user_model._default_manager.filter(pk=user_id))
        if found is None:
            return None
        user = found[0]
        return user if self.user_can_authenticate(user) else None
