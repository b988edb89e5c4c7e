"""The one error the domain raises: ``DomainError``.

Services and selectors raise it for input they refuse; each surface maps it once:
the API answers 400 naming the field (``core.api.errors.exception_handler``), HTML views
put it on the form field (``core.http.form_error``), commands print it and exit with their
code (``core.commands.DomainCommand``). Nothing parses a field name back out of a message.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """A request the domain refuses.

    ``message``: what is wrong, for people ("must be from 1 to 50 (got 0)");
    ``field``: the input it is about, as the caller named it ("trials_per_case",
    "graders[2].config.pattern", "head_file.cases[3].trials[0].passed"; "" when the whole
    request is refused); ``record``: the row or record when the input has many ("line 12",
    3; None otherwise); ``detail``: the whole sentence, when the caller phrases it itself
    (an import error names its line: "line 3: field passed: expected true or false");
    ``code``: what kind of refusal — "invalid" (the default: a 400, a
    form error), "conflict" (409: the state changed under the caller, or a key is taken),
    "too_large" (413), "not_found" (404), "precondition_failed" (412: an HTTP precondition,
    ``If-Match``, names a state the resource has left), "precondition_required" (428: a
    request that must name the state it changes did not). ``str(error)`` is ``detail``
    when given, else "field: message" (or the message alone): the text every surface
    shows. Extra keyword arguments (``limit``, ``key``, ``current_version``) travel to the
    API answer.
    """

    CODES = (
        "invalid",
        "conflict",
        "too_large",
        "not_found",
        "precondition_failed",
        "precondition_required",
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
