"""``DomainError``, the one error the domain raises. Each surface maps it once: the API
(``core.api.errors``), forms (``core.http.form_error``), commands (``core.commands``)."""

from __future__ import annotations

import json
from typing import Any


class DomainError(Exception):
    """A request the domain refuses.

    ``message``: for people; ``field``: the input as the caller named it
    ("graders[2].config.pattern", "" for the whole request); ``record``: row or record ("line
    12", 3, None); ``detail``: the whole sentence when the caller phrases it; ``code``:
    "invalid" (400), "conflict" (409), "too_large" (413), "not_found" (404),
    "precondition_failed" (412),
    "precondition_required" (428), "length_required" (411). ``str(error)`` is ``detail``,
    else "field: message". Extra keywords travel to the API answer."""

    CODES = (
        "invalid",
        "conflict",
        "too_large",
        "not_found",
        "precondition_failed",
        "precondition_required",
        "length_required",
    )

    def __init__(
        self,
        message: str = "",
        *,
        field: str = "",
        record: str | int | None = None,
        code: str = "invalid",
        detail: str | None = None,
        **extra: Any,
    ) -> None:
        if code not in self.CODES:
            raise ValueError(f"code must be one of {', '.join(self.CODES)}, got {code!r}")
        self.message = message or detail or ""
        self.field = field
        self.record = record
        self.code = code
        self.detail = detail
        self.extra = extra
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.detail:
            return self.detail
        return f"{self.field}: {self.message}" if self.field else self.message

    def as_dict(self) -> dict[str, object]:
        """The error as the API sends it: ``{"detail", "field", "record", **extra}``."""
        return {
            "detail": str(self),
            "field": self.field or None,
            "record": self.record,
            **self.extra,
        }


def value_shown(value: Any, *, limit: int = 80) -> str:
    """``value`` as the input wrote it, for an error message: JSON text (``true``, ``null``,
    ``"yes"``, ``1.5``, ``[1, 2]``), else Python's repr for what JSON cannot say; at most
    ``limit`` characters (then cut with "…"). Lone surrogates and control characters come out
    escaped, so the message itself is always storable and printable."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True, default=_not_json)
    except (TypeError, ValueError):
        text = repr(value)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "…"


def _not_json(value: Any) -> Any:
    raise TypeError(type(value).__name__)
