"""The one exception of the client: an answer of the Assay API that is not a success."""

from __future__ import annotations

from typing import Any


class AssayError(Exception):
    """A non-2xx answer of the Assay API, with the API's error fields.

    ``status``: the HTTP status (400 bad input, 401 no or unknown token, 403 a role is
    missing, 404 unknown id, 409 conflict such as an idempotency key reused with another
    body, 413 too large); ``detail``: the message; ``field``: the field or query parameter
    it is about (``"passed"``, ``"labels[0].verdict"``, ``"Idempotency-Key"``) or None;
    ``record``: the record it is about (ingest: the line or index) or None; ``body``: the
    decoded JSON answer (or its text when it is not JSON), with any further fields
    (``limit`` on a 413, ``key`` on a 409).
    """

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        field: str | None = None,
        record: Any = None,
        body: Any = None,
    ) -> None:
        self.status, self.detail, self.field, self.record, self.body = (
            status,
            detail,
            field,
            record,
            body,
        )
        where = ", ".join(
            part
            for part in (
                f"field {field}" if field else "",
                f"record {record}" if record is not None else "",
            )
            if part
        )
        super().__init__(f"HTTP {status}{f' ({where})' if where else ''}: {detail}")

    @classmethod
    def from_answer(cls, status: int, body: Any) -> AssayError:
        """The error of an answer whose decoded body is ``body``. The API answers
        ``{"detail", "field", "record", ...}`` for an error a service raised, and
        ``{"<field>": ["message", ...]}`` for input its parser refused; both give
        ``field`` and ``detail`` here."""
        if isinstance(body, dict) and isinstance(body.get("detail"), str):
            return cls(
                status,
                body["detail"],
                field=body.get("field"),
                record=body.get("record"),
                body=body,
            )
        if isinstance(body, dict) and body:
            name, messages = next(iter(body.items()))
            message = messages[0] if isinstance(messages, list) and messages else messages
            field = None if name == "non_field_errors" else name
            return cls(status, str(message), field=field, body=body)
        text = body if isinstance(body, str) else repr(body)
        return cls(status, text[:1000] or f"HTTP {status}", body=body)
