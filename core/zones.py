"""Time zone names from outside (a cookie, a ``?tz=`` parameter), read once.

``zoneinfo.ZoneInfo`` opens a file named after the key: a name that is a folder of the zone
database (``Europe``) raises ``IsADirectoryError`` and a very long one ``OSError``, neither of
which is a ``ZoneInfoNotFoundError``. ``zone_parse`` refuses both kinds, and every other
malformed name, before asking it.
"""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# IANA names: letters, digits, "_", "+", "-" in "/"-separated parts ("America/Argentina/Salta",
# "Etc/GMT+3"); at most 64 characters (the longest real one is 32).
ZONE_NAME = re.compile(r"[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*")
ZONE_NAME_MAX = 64


def zone_parse(name: str | None) -> ZoneInfo | None:
    """The IANA zone called ``name``, or None when the name is empty, malformed, too long,
    or not a zone of the database (a folder of it included). Never raises."""
    if not name or len(name) > ZONE_NAME_MAX or not ZONE_NAME.fullmatch(name):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a folder, a bad path
        return None
