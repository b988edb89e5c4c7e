"""schemathesis against the live API (issue 6: no request, however malformed, gets a 500).

A real server answers: waitress in a thread over the test database (pytest-django's
``live_server``, Django's development server, costs ~45 ms of socket waiting per request
here, 5x the app's own time; waitress does not).
The OpenAPI schema is read from its ``/api/schema/`` and handed to the schemathesis CLI
(``schemathesis run``, its documented interface), which calls every operation with its
examples phase, its coverage phase (boundary, missing and malformed values) and Hypothesis
fuzzing (valid and invalid data) under the ``not_a_server_error`` check. A failing test
shows schemathesis' failure report: each operation with a curl command reproducing the
request that got the 5xx.

Seeded data (a suite, cases, two finished runs with trials and grades, a baseline, a judge
version, a calibration set, a label) gives the generator real ids: the seeded ids are added
to the fetched schema as ``example`` values of the parameters and request-body fields that
take them, so the examples phase reaches real rows while the other phases try random and
malformed ids.

Passes: the lead (alice's token), ``ASSAY_FUZZ_MAX_EXAMPLES`` (default 10) fuzzed requests
per operation; then, shorter, an outsider (mallory, no role) and no token, where every
answer must also be 403 and 401 (checked on the HAR report of every request sent). The
seed is fixed (``ASSAY_FUZZ_SEED``, default 0): CI sends the same requests every time;
raise the examples or change the seed locally for a deeper search. Timings: README,
"API docs and schema checks".

(schemathesis' own pytest plugin, ``schemathesis.pytest.from_fixture``, is what a live
schema would need, but it fails on pytest 9.2: it sets ``Function._nodeid``, gone there.)
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import requests
from django.contrib.auth.models import User
from django.urls import Resolver404, resolve
from waitress.server import create_server

from apitokens.tokens import token_create
from config.wsgi import application
from evals.api.runs.suites import SuiteViewSet
from evals.baselines import baseline_set
from evals.models import Case, Grade, Run, Suite, Trial
from judges.models import Judge, JudgeVersion
from labeling.models import CalibrationItem, CalibrationSet, Label

# serialized_rollback: a transactional test flushes the database after it runs, which would
# drop the role groups created by a data migration; this restores them for the next test.
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

MAX_EXAMPLES = int(os.environ.get("ASSAY_FUZZ_MAX_EXAMPLES", "10"))
REFUSED_MAX_EXAMPLES = max(1, MAX_EXAMPLES // 5)
SEED = os.environ.get("ASSAY_FUZZ_SEED", "0")
# CI checks 5xx only; locally, e.g. ASSAY_FUZZ_CHECKS=all also reports schema mismatches.
CHECKS = os.environ.get("ASSAY_FUZZ_CHECKS", "not_a_server_error")
ALL_PHASES = "examples,coverage,fuzzing"
# Refusal comes before any parsing, so the coverage phase's malformed values add nothing there.
REFUSED_PHASES = "examples,fuzzing"
REQUEST_TIMEOUT_S = 30
CLI_TIMEOUT_S = 600


# Request-body fields whose valid values a generator cannot guess: a run to start (a
# simulated target over the seeded cases: no network, deterministic).
BODY_EXAMPLES = {
    "name": "fuzz-run",
    "target": {"kind": "simulated", "seed": 7, "default_pass_probability": 0.7},
    "graders": [{"key": "exact", "kind": "exact", "config": {}, "gating": True}],
    "trials_per_case": 2,
}


@dataclass(frozen=True)
class Seeded:
    """Ids of the seeded rows, by the parameter or field name that takes them."""

    by_name: dict[str, object]  # "suite" -> suite uuid, "base" -> base run uuid, ...
    by_resource: dict[str, str | int]  # "runs" -> run uuid (path ids under /api/runs/)
    # Whole JSON bodies by path, where property examples cannot make a valid one (the gate's
    # optional ``*_file`` fields would be filled with null, which it refuses; ingest's
    # ``suite`` and ``run`` are names, not ids).
    bodies: dict[str, dict]


def seed(lead: User) -> Seeded:
    """A suite of 4 cases; two finished runs (base, head), 1 trial per case, each graded by
    an exact grader and a recorded judge version; head is the baseline; a calibration
    set over head's trials with one label."""
    suite = Suite.objects.create(name="fuzz-suite")
    cases = [
        Case.objects.create(
            suite=suite, key=f"c{i}", input=f"What is {i}+{i}?", expected=str(2 * i), tags=["arith"]
        )
        for i in range(1, 5)
    ]
    judge = Judge.objects.create(name="fuzz-judge", kind=Judge.Kind.RECORDED)
    version = JudgeVersion.objects.create(judge=judge, number=1, model="judge-model", protocol="p1")
    graders = [{"key": "exact", "kind": "exact", "config": {}, "gating": True}]
    runs = {}
    for name in ("base", "head"):
        run = Run.objects.create(
            suite=suite,
            name=name,
            target_kind="simulated",
            graders=graders,
            status=Run.Status.SUCCEEDED,
            trials_total=len(cases),
            trials_finished=len(cases),
        )
        for i, case in enumerate(cases):
            trial = Trial.objects.create(
                run=run, case=case, attempt=1, status=Trial.Status.OK, output=str(2 * (i + 1))
            )
            passed = i != 3 or name == "base"
            Grade.objects.create(
                trial=trial,
                grader="exact",
                status=Grade.Status.OK,
                passed=passed,
                score=float(passed),
                reason="compared",
            )
            Grade.objects.create(
                trial=trial,
                grader=version.grader_key,
                judge_version=version,
                gating=False,
                status=Grade.Status.OK,
                passed=passed,
                reason="judged",
            )
        runs[name] = run
    head = runs["head"]
    baseline = baseline_set(suite=suite, run=head, by=lead, note="fuzz")
    trials = list(head.trials.order_by("case__key"))
    cset = CalibrationSet.objects.create(
        name="fuzz-cal", suite=suite, run=head, judge_version=version, size=len(trials), seed=0
    )
    CalibrationItem.objects.bulk_create(
        CalibrationItem(calibration_set=cset, trial=t, position=i) for i, t in enumerate(trials)
    )
    label = Label.objects.create(trial=trials[0], reviewer=lead, verdict="pass", critique="right")
    grade = Grade.objects.filter(trial=trials[0], grader="exact").get()
    ids = {
        "suite": str(suite.uuid),
        "case": str(cases[0].uuid),
        "run": str(head.uuid),
        "head": str(head.uuid),
        "base": str(runs["base"].uuid),
        "trial": str(trials[0].uuid),
        "judge_version": str(version.uuid),
        "calibration_set": str(cset.uuid),
    }
    resources = {
        "suites": ids["suite"],
        "cases": ids["case"],
        "runs": ids["run"],
        "trials": ids["trial"],
        "grades": grade.id,
        "baselines": baseline.id,
        "judge-versions": ids["judge_version"],
        "calibration-sets": ids["calibration_set"],
        "labels": label.id,
    }
    bodies = {
        "/api/gate": {"head": ids["head"], "base": ids["base"]},
        "/api/ingest": {
            "suite": "fuzz-ingest",
            "run": "ingested",
            "trials": [
                {"case_id": "c1", "input": "1+1", "output": "2", "passed": True, "attempt": 1}
            ],
        },
    }
    return Seeded(by_name={**BODY_EXAMPLES, **ids}, by_resource=resources, bodies=bodies)


def with_seeded_examples(raw: dict, seeded: Seeded) -> dict:
    """A copy of the OpenAPI schema ``raw`` whose parameters and request-body properties
    that take a seeded row carry its id as their ``example``: a path ``{uuid}``/``{id}``
    under ``/api/<resource>/`` takes that resource's row; a query parameter or body field
    named ``suite``, ``run``, ``base``, ``head``, ... takes the row of that name, the
    fields of ``BODY_EXAMPLES`` take theirs, and the JSON bodies of ``seeded.bodies``
    become their operation's example body."""
    schema = copy.deepcopy(raw)
    for path, item in schema["paths"].items():
        resource = path.removeprefix("/api/").split("/")[0]
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for param in operation.get("parameters", []):
                if param["in"] == "path" and resource in seeded.by_resource:
                    param["example"] = seeded.by_resource[resource]
                elif param["name"] in seeded.by_name:
                    param["example"] = seeded.by_name[param["name"]]
            content = operation.get("requestBody", {}).get("content", {})
            if path in seeded.bodies and "application/json" in content:
                content["application/json"]["example"] = seeded.bodies[path]
    for component in schema.get("components", {}).get("schemas", {}).values():
        for name, prop in (component.get("properties") or {}).items():
            if name in seeded.by_name and not prop.get("readOnly"):
                prop["example"] = seeded.by_name[name]
    return schema


@dataclass(frozen=True)
class FuzzRun:
    """One schemathesis CLI run: exit code, console report, the JSON run report and every
    request sent with the status it got (from the HAR report)."""

    exit_code: int
    output: str
    report: dict
    exchanges: list[tuple[str, str, int]]  # (method, url, status)

    def explain(self) -> str:
        """The console report from its failures section on (each failing operation with a
        curl command reproducing the request), or all of it when there is no such section."""
        marker = self.output.find("FAILURES")
        return self.output[marker:] if marker != -1 else self.output


def run_schemathesis(
    server_url: str,
    schema: dict,
    folder: Path,
    *,
    headers: list[str],
    max_examples: int,
    phases: str = ALL_PHASES,
    extra: tuple[str, ...] = (),
) -> FuzzRun:
    """``schemathesis run`` over ``schema`` against the server: ``CHECKS`` (by default
    ``not_a_server_error`` only), one worker (the server is one process), fixed seed."""
    folder.mkdir(parents=True)
    schema_file, report_file, har_file = (
        folder / name for name in ("schema.json", "report.json", "requests.har")
    )
    schema_file.write_text(json.dumps(schema))
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        str(schema_file),
        "--url",
        server_url,
        "--checks",
        CHECKS,
        "--phases",
        phases,
        "--max-examples",
        str(max_examples),
        "--seed",
        SEED,
        "--generation-database",
        "none",
        "--workers",
        "1",
        "--request-timeout",
        str(REQUEST_TIMEOUT_S),
        "--no-color",
        "--report",
        "json,har",
        "--report-json-path",
        str(report_file),
        "--report-har-path",
        str(har_file),
    ]
    for header in headers:
        command += ["--header", header]
    command += extra
    proc = subprocess.run(
        command, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, cwd=folder, check=False
    )
    har = json.loads(har_file.read_text()) if har_file.exists() else {"log": {"entries": []}}
    return FuzzRun(
        exit_code=proc.returncode,
        output=proc.stdout + proc.stderr,
        report=json.loads(report_file.read_text()) if report_file.exists() else {},
        exchanges=[
            (e["request"]["method"], e["request"]["url"], e["response"]["status"])
            for e in har["log"]["entries"]
        ],
    )


@pytest.fixture
def server_url(transactional_db) -> Iterator[str]:
    """Base URL of waitress serving the project from a thread (2 worker threads)."""

    server = create_server(application, host="127.0.0.1", port=0, threads=2)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        server.close()
        server.task_dispatcher.shutdown()
        thread.join(timeout=10)


@pytest.fixture
def tokens(alice, mallory) -> dict[str, str]:
    return {
        "lead": token_create(user=alice, name="fuzz")[1],
        "outsider": token_create(user=mallory, name="fuzz")[1],
    }


@pytest.fixture
def schema(server_url, tokens) -> dict:
    """The live server's OpenAPI schema with the seeded ids as examples (read as the lead)."""
    seeded = seed(User.objects.get(username="alice"))
    response = requests.get(
        f"{server_url}/api/schema/",
        params={"format": "json"},
        headers={"Authorization": f"Bearer {tokens['lead']}"},
        timeout=REQUEST_TIMEOUT_S,
    )
    assert response.status_code == 200, response.text[:500]
    return with_seeded_examples(response.json(), seeded)


def _no_route(url: str) -> bool:
    """True when no URL pattern matches ``url``'s path (a malformed path id): Django answers
    404 before any view, so before authentication."""
    try:
        resolve(unquote(urlsplit(url).path))
    except Resolver404:
        return True
    return False


# The lead pass in parts, so that no test runs past 30 s on the 2-core CI machine; the
# last part is every operation the others leave out.
PARTS = {
    "runs": r"^/api/runs",
    "trials-grades-cases": r"^/api/(trials|grades|cases|suites|baselines)",
    "judges": r"^/api/(judge-runs|judge-versions|calibration-sets)",
    "gate-comparisons": r"^/api/(gate|comparisons|top-ups)",
}
OTHERS = "|".join(f"({regex})" for regex in PARTS.values())


def _in_part(path: str, part: str) -> bool:
    if part in PARTS:
        return bool(re.match(PARTS[part], path))
    return not re.match(OTHERS, path)


def _operations(schema: dict, *, part: str) -> int:
    return sum(
        1
        for path, item in schema["paths"].items()
        for method in item
        if method in {"get", "put", "post", "patch", "delete"} and _in_part(path, part)
    )


@pytest.mark.parametrize("part", [*PARTS, "the-rest"])
def test_no_request_from_a_lead_gets_a_server_error(part, server_url, schema, tokens, tmp_path):
    run = run_schemathesis(
        server_url,
        schema,
        tmp_path / "lead",
        max_examples=MAX_EXAMPLES,
        headers=[f"Authorization: Bearer {tokens['lead']}"],
        extra=(
            ("--include-path-regex", PARTS[part])
            if part in PARTS
            else ("--exclude-path-regex", OTHERS)
        ),
    )
    assert run.exit_code == 0, run.explain()
    assert _operations(schema, part=part) > 0
    assert run.report["operations"]["tested"] == _operations(schema, part=part), run.output
    assert run.exchanges, "schemathesis sent no request"
    print(
        f"lead pass: {len(run.exchanges)} requests, {run.report['operations']['tested']} "
        f"operations, {run.report['running_time']:.1f} s"
    )


@pytest.mark.parametrize(("who", "status"), [("outsider", 403), ("anonymous", 401)])
def test_an_outsider_and_a_request_without_a_token_are_refused_never_a_server_error(
    who, status, server_url, schema, tokens, tmp_path
):
    headers = [f"Authorization: Bearer {tokens['outsider']}"] if who == "outsider" else []
    run = run_schemathesis(
        server_url,
        schema,
        tmp_path / who,
        headers=headers,
        max_examples=REFUSED_MAX_EXAMPLES,
        phases=REFUSED_PHASES,
    )
    assert run.exit_code == 0, run.explain()
    assert run.exchanges, "schemathesis sent no request"
    answered = [
        f"{method} {url} -> {got}"
        for method, url, got in run.exchanges
        if got != status and not (got == 404 and _no_route(url))
    ]
    assert answered == [], f"{who} must get {status} from every request:\n" + "\n".join(
        answered[:50]
    )
    print(f"{who} pass: {len(run.exchanges)} requests, {run.report['running_time']:.1f} s")


def test_a_server_error_fails_the_run_and_shows_the_request(
    server_url, schema, tokens, tmp_path, monkeypatch
):
    """The harness itself: a view that raises makes the CLI fail, naming the operation and
    the request (curl), so a 500 can never pass unnoticed."""

    def explode(self, request, *args, **kwargs):
        raise RuntimeError("planted")

    monkeypatch.setattr(SuiteViewSet, "list", explode)
    run = run_schemathesis(
        server_url,
        schema,
        tmp_path / "planted",
        max_examples=1,
        headers=[f"Authorization: Bearer {tokens['lead']}"],
        phases="fuzzing",
        extra=("--include-name", "GET /api/suites/"),
    )
    assert run.exit_code != 0, run.output
    assert "GET /api/suites/" in run.explain()
    assert "Server error" in run.explain() and "curl" in run.explain()
