"""The three roles, as Django groups created by a migration."""

REVIEWER = "reviewer"
ENGINEER = "engineer"
LEAD = "lead"
ROLES = (REVIEWER, ENGINEER, LEAD)


def user_has_role(user, *roles: str) -> bool:
    """True when ``user`` is in any of ``roles`` (superusers have every role)."""
    if not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    return user.groups.filter(name__in=roles).exists()
