"""Time zone names from outside (cookie, ``?tz=``). ``ZoneInfo`` opens a file named after the
key, so a folder name or a very long one raises ``OSError``: ``zone_parse`` refuses them first."""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# IANA names: letters, digits, "_", "+", "-" in "/"-separated parts ("America/Argentina/Salta",
# "Etc/GMT+3"); at most 64 characters (the longest real one is 32).
ZONE_NAME = re.compile(r"[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*")
ZONE_NAME_MAX = 64


def zone_parse(name: str | None) -> ZoneInfo | None:
    """The IANA zone ``name``, or None when empty, malformed, too long or unknown. Never raises."""
    if not name or len(name) > ZONE_NAME_MAX or not ZONE_NAME.fullmatch(name):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a folder, a bad path
        return None
