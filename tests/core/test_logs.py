"""core.logs: JSON lines with the run and trial ids where the code set them, also inside the
call pool's thread and its asyncio tasks; an unknown format refused."""

from __future__ import annotations

import contextvars
import io
import json
import logging

import pytest

from core.logs import ContextFilter, JsonFormatter, log_context, log_trial_set, logging_config
from core.registry import registered
from evals.runner.calls import CallPool
from evals.runner.targets import CaseInput

LOGGER = "assay.test.logs"


@registered("pipeline")
def logged(case: CaseInput) -> str:
    """A pipeline that logs (the tests' registry lists it)."""
    logging.getLogger(LOGGER).info("pipeline called for %s", case.key)
    return "done"


@pytest.fixture
def lines():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(ContextFilter())
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False

    def read() -> list[dict]:
        return [json.loads(line) for line in stream.getvalue().splitlines()]

    yield logger, read
    logger.removeHandler(handler)


def test_a_record_is_one_json_line_with_the_context_ids(lines):
    logger, read = lines
    logger.info("outside")
    with log_context(run_id=12):
        logger.info("chunk of %d", 3, extra={"chunk": [1, 2]})
        with log_context(trial_id=99):
            logger.warning("a trial's call")
        logger.info("back")
    first, chunk, trial, back = read()
    assert (first["run_id"], first["trial_id"]) == (None, None)
    assert chunk["message"] == "chunk of 3" and chunk["chunk"] == [1, 2]
    assert (chunk["run_id"], trial["run_id"], trial["trial_id"]) == (12, 12, 99)
    assert trial["level"] == "WARNING" and trial["logger"] == "assay.test.logs"
    assert back["trial_id"] is None
    assert first["time"].endswith("+00:00")


def test_an_exception_is_kept_in_the_line(lines):
    logger, read = lines
    try:
        raise ValueError("bad value")
    except ValueError:
        logger.exception("failed")
    (record,) = read()
    assert "ValueError: bad value" in record["exception"]


def test_a_call_in_the_pools_thread_carries_its_run_and_trial(lines):
    _, read = lines
    config = {"kind": "callable", "path": "tests.core.test_logs:logged"}
    with log_context(run_id=7), CallPool(config) as pool:
        pool.submit([(41, CaseInput(key="c1", input="q")), (42, CaseInput(key="c2", input="q"))])
        results = pool.close()
    assert sorted(trial_id for trial_id, _ in results) == [41, 42]
    records = sorted(read(), key=lambda r: r["message"])
    assert [(r["message"], r["run_id"], r["trial_id"]) for r in records] == [
        ("pipeline called for c1", 7, 41),
        ("pipeline called for c2", 7, 42),
    ]


def test_log_trial_set_marks_what_follows_in_its_context(lines):
    logger, read = lines

    def serve():
        log_trial_set(5)
        logger.info("serving")

    contextvars.copy_context().run(serve)
    logger.info("after")
    serving, after = read()
    assert serving["trial_id"] == 5 and after["trial_id"] is None


def test_the_configuration_for_json_and_text_and_an_unknown_format():
    json_config = logging_config(log_format="json", level="INFO")
    assert json_config["handlers"]["console"]["formatter"] == "json"
    assert "formatters" not in logging_config(log_format="text", level="INFO")
    with pytest.raises(ValueError, match="ASSAY_LOG_FORMAT='xml' is not one of text, json"):
        logging_config(log_format="xml", level="INFO")
