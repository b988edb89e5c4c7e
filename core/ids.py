"""Reading ids from outside: the one UUID parser every view, API and command uses."""

from __future__ import annotations

import uuid


def uuid_parse(raw: object) -> uuid.UUID | None:
    """``raw`` as a UUID when it is a string in any form ``uuid.UUID`` reads (hex with or
    without dashes, braces, ``urn:uuid:``), or already a UUID; None for anything else (an
    integer is never read as ``UUID(int=...)``)."""
    if isinstance(raw, uuid.UUID):
        return raw
    if not isinstance(raw, str) or not raw or len(raw) > 100:
        return None
    try:
        return uuid.UUID(raw)
    except ValueError:
        return None
