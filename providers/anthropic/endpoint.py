"""What a Messages API config adds to an endpoint's (``providers.endpoint``): the
``anthropic-version`` header's value and the settings the API requires. Errors are
``DomainError`` on ``<prefix>.<name>``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from core.errors import DomainError
from providers.shown import value_shown

DEFAULT_API_KEY_ENV = "ANTHROPIC_API_KEY"
# The API version every call names (docs.anthropic.com/en/api/versioning).
DEFAULT_VERSION = "2023-06-01"
# A version is sent as a header value: letters, digits, dots, dashes and underscores only.
_VERSION = re.compile(r"[A-Za-z0-9._-]{1,64}")
# Set by Assay (``system``: the target's ``system_prompt``), never a setting.
RESERVED_SETTINGS = frozenset({"system"})


def version_parse(config: Mapping[str, Any], *, prefix: str) -> str:
    """``config["anthropic_version"]``, else ``DEFAULT_VERSION``. Raises ``DomainError`` on
    ``<prefix>.anthropic_version``."""
    version = config.get("anthropic_version", DEFAULT_VERSION)
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise DomainError(
            f"expected an API version such as {DEFAULT_VERSION!r} (letters, digits, '.', '-', "
            f"'_'), got {value_shown(version, 40)}",
            field=f"{prefix}.anthropic_version",
        )
    return version


def settings_check(settings: Mapping[str, Any], *, prefix: str) -> None:
    """The settings a Messages call needs: ``max_tokens``, an integer of at least 1 (the API has
    no default), and none of ``RESERVED_SETTINGS``. Raises ``DomainError`` on
    ``<prefix>.settings.<name>``."""
    reserved = sorted(RESERVED_SETTINGS & set(settings))
    if reserved:
        raise DomainError(
            "set by Assay (the target's system_prompt), not a setting",
            field=f"{prefix}.settings.{reserved[0]}",
        )
    field = f"{prefix}.settings.max_tokens"
    if "max_tokens" not in settings:
        raise DomainError(
            "required by Anthropic's Messages API, which has no default: the most tokens a "
            "reply may use (e.g. 1024)",
            field=field,
        )
    value = settings["max_tokens"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DomainError(
            f"expected an integer of at least 1, got {value_shown(value, 40)}", field=field
        )
