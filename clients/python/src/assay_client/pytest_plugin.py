"""The pytest plugin: each test, and each repeat of it, as a trial of an Assay run.

    ASSAY_URL=https://assay.example.com ASSAY_TOKEN=... \\
      pytest evals/ --assay-suite checkout --assay-run "pr-42-$GITHUB_SHA" --assay-repeat 5

Inactive unless ``--assay-suite`` is given. The case key is the test's node id without the
repeat suffix, so the repeats of a test (``--assay-repeat N``, or pytest-repeat's
``--count N``) are attempts 1..N of one case. Grades follow ``assay_client.trials``: passed,
failed (an assertion), errored (an error in setup or teardown, or any other exception:
never a pass, never a skip); skipped tests are not sent. ``record_property`` values named
like a trial field (``output``, ``input``, ``expected``, ``score``, ``tags``, ``model``,
``input_tokens``, ``output_tokens``, ``cost_usd``) fill it; every other one goes to the
trial's ``extra``. Markers other than pytest's own are the case's tags.

At the end of the session the run is posted to ``POST /api/ingest`` as NDJSON with its run
key (``--assay-run-key``, default ``pytest:<suite>/<run>``): a retried post of the same
results writes once; other results under a used key are refused (409). When the run
cannot be sent the session exits 3 (pytest's internal-error code) and says why; an
interrupted session, or one stopped early by ``-x``/``--maxfail``, sends nothing. Under
pytest-xdist the controller sends the run.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay_client.client import AssayClient
from assay_client.errors import AssayError
from assay_client.trials import ERRORED, FAILED, PASSED, SKIPPED, TrialResult, case_key, storable

ATTEMPT = "_assay_attempt"  # the parameter --assay-repeat adds
REPEAT_STEP = "__pytest_repeat_step_number"  # pytest-repeat's (0-based)
# Markers that say how pytest runs a test, not what the case is about: never tags.
RUNNER_MARKS = frozenset(
    {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings", "repeat"}
)
RECORDER = "assay-recorder"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("assay", "record tests as trials of an Assay run")
    group.addoption(
        "--assay-suite", help="suite to record into (created when absent); turns the plugin on"
    )
    group.addoption("--assay-run", help="run name, new in its suite (default: pytest-<UTC time>)")
    group.addoption(
        "--assay-run-key", help="idempotency key of the post (default: pytest:<suite>/<run>)"
    )
    group.addoption(
        "--assay-suite-kind",
        choices=("regression", "capability"),
        default="regression",
        help="kind of a new suite (default regression)",
    )
    group.addoption("--assay-model", help="the run's model, as shown on the report")
    group.addoption("--assay-source-version", help="version of the system under test (a commit)")
    group.addoption(
        "--assay-repeat",
        type=int,
        default=1,
        help="run each test N times: attempts 1..N of its case (default 1)",
    )
    group.addoption(
        "--assay-url", help="the Assay server (default: $ASSAY_URL); token: $ASSAY_TOKEN"
    )
    group.addoption("--assay-output", help="write the ingest answer (the run's UUID, counts) here")


def pytest_configure(config: pytest.Config) -> None:
    repeat = config.getoption("assay_repeat")
    if repeat < 1:
        raise pytest.UsageError(f"--assay-repeat: must be at least 1, got {repeat}")
    if repeat > 1 and (getattr(config.option, "count", None) or 1) > 1:
        raise pytest.UsageError("give --assay-repeat or pytest-repeat's --count, not both")
    suite = config.getoption("assay_suite")
    if suite is not None and not suite.strip():
        # `--assay-suite "$SUITE"` with SUITE unset: never a session that runs every test
        # and records nothing (or fails to record at the end).
        raise pytest.UsageError("--assay-suite: empty; give the suite's name")
    run = config.getoption("assay_run")
    if run is not None and not run.strip():
        raise pytest.UsageError("--assay-run: empty; give a run name, or leave it out")
    if suite is None:
        return
    if not (config.getoption("assay_url") or os.environ.get("ASSAY_URL")):
        raise pytest.UsageError("--assay-suite needs the server: --assay-url or ASSAY_URL")
    if not os.environ.get("ASSAY_TOKEN"):
        raise pytest.UsageError("--assay-suite needs an API token in ASSAY_TOKEN")
    config.pluginmanager.register(Recorder(config), RECORDER)


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``--assay-repeat N``: parametrize every test by attempt, last, with ids ``i-N``."""
    repeat = metafunc.config.getoption("assay_repeat")
    if repeat > 1:
        metafunc.fixturenames.append(ATTEMPT)
        metafunc.parametrize(
            ATTEMPT, range(1, repeat + 1), indirect=True, ids=lambda i: f"{i}-{repeat}"
        )


@pytest.fixture
def _assay_attempt(request: pytest.FixtureRequest) -> int:
    """The attempt number (1..N) of this repeat of the test."""
    return request.param


def attempt_of(item: pytest.Item) -> int | None:
    """The attempt (1-based) of a repeated test, None when it is not repeated."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if ATTEMPT in params:
        return int(params[ATTEMPT])
    if REPEAT_STEP in params:
        return int(params[REPEAT_STEP]) + 1
    return None


def phase_outcome(call: pytest.CallInfo, report: pytest.TestReport) -> tuple[str | None, str]:
    """A phase's contribution to the trial's grade and its reason: setup and teardown add
    nothing when they pass, ``errored`` when they fail; the call is passed, failed (an
    assertion or ``pytest.fail``), errored (any other exception) or skipped."""
    excinfo = call.excinfo
    if report.when != "call":
        if report.skipped:
            return SKIPPED, ""
        if report.failed:
            text = excinfo.exconly() if excinfo else report.longreprtext
            return ERRORED, f"error in {report.when}: {text}"
        return None, ""
    if excinfo is None:
        if report.failed:  # a strict xfail that passed
            return FAILED, f"[XPASS(strict)] {getattr(report, 'longreprtext', '')}".strip()
        return PASSED, "passed"
    error = excinfo.value
    if isinstance(error, pytest.skip.Exception) and not hasattr(report, "wasxfail"):
        return SKIPPED, ""
    if isinstance(error, AssertionError | pytest.fail.Exception):
        return FAILED, excinfo.exconly()
    return ERRORED, excinfo.exconly()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Attach the phase's trial facts to its report as ``report.assay`` (a dict, so it
    travels from a pytest-xdist worker to the controller). Text the database cannot store
    (U+0000, a lone surrogate) in ``record_property`` values and the reason is replaced
    here, where the test ran, and counted (and in pytest's failure report, which then
    becomes plain text): a lone surrogate crashed pytest-xdist's channel to the controller
    and lost the session."""
    report = yield
    if item.config.getoption("assay_suite"):
        attempt = attempt_of(item)
        outcome, reason = phase_outcome(call, report)
        properties, replaced = storable(list(report.user_properties))
        reason, replaced_reason = storable(reason)
        report.user_properties = properties
        if report.longrepr is not None:
            text, replaced_longrepr = storable(report.longreprtext)
            if replaced_longrepr:  # pytest's own report: kept as text, without what crashed
                report.longrepr = text
        report.assay = {
            "case": case_key(item.nodeid, attempt),
            "attempt": attempt or 1,
            "outcome": outcome,
            "reason": reason,
            "tags": sorted({m.name for m in item.iter_markers()} - RUNNER_MARKS),
            "latency_ms": call.duration * 1000 if report.when == "call" else None,
            "created_at": datetime.fromtimestamp(call.start, UTC).isoformat(),
            "properties_replaced": replaced,
            "reason_replaced": replaced_reason,
        }
    return report


class Recorder:
    """Gathers the trials of the session and posts them as one run when it ends."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.suite: str = config.getoption("assay_suite").strip()
        self.run: str = (
            config.getoption("assay_run") or f"pytest-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
        ).strip()
        self.run_key: str = config.getoption("assay_run_key") or f"pytest:{self.suite}/{self.run}"
        self.results: dict[str, TrialResult] = {}
        self.message = ""

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        facts = getattr(report, "assay", None)
        if facts is None:
            return
        result = self.results.setdefault(
            report.nodeid,
            TrialResult(case=facts["case"], attempt=facts["attempt"], tags=facts["tags"]),
        )
        if facts["outcome"] is not None:
            result.phase_add(facts["outcome"], facts["reason"], facts["reason_replaced"])
        if facts["latency_ms"] is not None:
            result.latency_ms = facts["latency_ms"]
        result.created_at = result.created_at or facts["created_at"]
        result.properties = [(name, value) for name, value in report.user_properties]
        result.properties_replaced = facts["properties_replaced"]

    def header(self) -> dict[str, Any]:
        """The ingest header: suite, run, its kind, key and the optional labels."""
        header: dict[str, Any] = {
            "suite": self.suite,
            "suite_kind": self.config.getoption("assay_suite_kind"),
            "run": self.run,
            "run_key": self.run_key,
        }
        for name in ("model", "source_version"):
            value = self.config.getoption(f"assay_{name}")
            if value:
                header[name] = value
        return header

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput"):
            return  # a pytest-xdist worker: the controller sends the run
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            self.message = "assay: nothing sent: the session was interrupted"
            return
        if session.shouldstop or session.shouldfail:
            # -x, --maxfail: the cases after the stop were never run; a run missing them
            # would compare as if they had been removed.
            self.message = "assay: nothing sent: the session stopped early (-x or --maxfail)"
            return
        records = [r for r in (result.record() for result in self.results.values()) if r]
        if not records:
            self.message = "assay: nothing sent: no test was run"
            return
        try:
            with AssayClient(self.config.getoption("assay_url")) as client:
                answer = client.ingest(self.header(), records)
        except (AssayError, httpx.HTTPError, ValueError) as exc:
            self.message = f"assay: the run was NOT recorded: {exc}"
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            return
        counts = answer.get("counts", {})
        self.message = (
            f"assay: recorded run {self.run!r} of suite {self.suite!r}: "
            f"{counts.get('trials')} trials of {counts.get('cases')} cases; {answer.get('page')}"
        )
        output = self.config.getoption("assay_output")
        if output:
            Path(output).write_text(json.dumps(answer, indent=2) + "\n", encoding="utf-8")

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.message:
            terminalreporter.write_sep("-", "assay")
            terminalreporter.write_line(self.message)
