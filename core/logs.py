"""Structured logs (docs/operations.md): with ``ASSAY_LOG_FORMAT=json`` every record is one JSON
line (``JsonFormatter``) carrying the run and trial it is about where the code knows them.
The runner sets them (``log_context`` around a chunk, ``log_trial_set`` per call); a
``contextvars`` value follows the code into asyncio tasks, and ``evals.runner.calls.CallPool``
copies it into its calling thread. The ids are the database ids (``run_id``, ``trial_id``),
as the admin shows them."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime

LOG_FORMATS = ("text", "json")

_run_id: ContextVar[int | None] = ContextVar("assay_log_run_id", default=None)
_trial_id: ContextVar[int | None] = ContextVar("assay_log_trial_id", default=None)

# LogRecord attributes that are not a caller's ``extra``.
_RECORD_FIELDS = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys()
    | {"message", "asctime", "run_id", "trial_id", "taskName"}
)


@contextmanager
def log_context(*, run_id: int | None = None, trial_id: int | None = None) -> Iterator[None]:
    """Within the block, records carry ``run_id`` and ``trial_id`` (None: unchanged)."""
    tokens = []
    if run_id is not None:
        tokens.append((_run_id, _run_id.set(run_id)))
    if trial_id is not None:
        tokens.append((_trial_id, _trial_id.set(trial_id)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def log_trial_set(trial_id: int | None) -> None:
    """From here on in this context (an asyncio task, a thread's run), records carry
    ``trial_id``: for a loop serving one trial after another, where a block does not fit."""
    _trial_id.set(trial_id)


class ContextFilter(logging.Filter):
    """Puts the context's ``run_id`` and ``trial_id`` on every record (None when unknown)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "run_id", None) is None:
            record.run_id = _run_id.get()
        if getattr(record, "trial_id", None) is None:
            record.trial_id = _trial_id.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time`` (UTC, ISO 8601, ms), ``level``, ``logger``, ``message``,
    ``process``, ``run_id``, ``trial_id``, a caller's ``extra`` fields (as text when not
    JSON), and ``exception`` (the traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
            "run_id": getattr(record, "run_id", None),
            "trial_id": getattr(record, "trial_id", None),
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_FIELDS and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def logging_config(*, log_format: str, level: str) -> dict[str, object]:
    """Django's ``LOGGING`` for ``log_format`` (one of ``LOG_FORMATS``) at ``level``. Raises
    ValueError naming the format when unknown."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"ASSAY_LOG_FORMAT={log_format!r} is not one of {', '.join(LOG_FORMATS)}")
    handler: dict[str, object] = {"class": "logging.StreamHandler"}
    config: dict[str, object] = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"console": handler},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {"httpx": {"level": "WARNING"}},
    }
    if log_format == "json":
        handler.update(formatter="json", filters=["context"])
        config["formatters"] = {"json": {"()": "core.logs.JsonFormatter"}}
        config["filters"] = {"context": {"()": "core.logs.ContextFilter"}}
    return config
