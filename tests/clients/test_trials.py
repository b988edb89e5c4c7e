"""assay_client.trials: case keys without the repeat id, and trial records (no server)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest
from assay_client.trials import (
    ERRORED,
    FAILED,
    KEY_MAX,
    PASSED,
    SKIPPED,
    TrialResult,
    case_id,
    case_key,
)


@pytest.mark.parametrize(
    ("nodeid", "attempt", "key"),
    [
        ("t.py::test_f[2-5]", 2, "t.py::test_f"),
        ("t.py::test_f[a-2-5]", 2, "t.py::test_f[a]"),
        ("t.py::test_f[1-2-12-12]", 12, "t.py::test_f[1-2]"),
        ("t.py::C::test_f[x-y-1-1]", 1, "t.py::C::test_f[x-y]"),
        ("t.py::test_f[a]", None, "t.py::test_f[a]"),
        # Not this attempt's id: the node id is kept whole, never cut at a guess.
        ("t.py::test_f[a-3-5]", 2, "t.py::test_f[a-3-5]"),
    ],
)
def test_the_case_key_is_the_node_id_without_the_repeat_id(nodeid, attempt, key):
    assert case_key(nodeid, attempt) == key


def test_the_worst_phase_wins_and_a_skip_is_no_trial():
    skipped = TrialResult(case="c", attempt=1)
    skipped.phase_add(SKIPPED, "")
    assert skipped.record() is None
    torn = TrialResult(case="c", attempt=2)
    torn.phase_add(PASSED, "passed")
    torn.phase_add(ERRORED, "error in teardown: OSError: x")
    record = torn.record()
    assert record["status"] == "error"
    assert record["error_message"] == "error in teardown: OSError: x"
    assert "judge_status" not in record
    assert "passed" not in record and "reason" not in record
    failed = TrialResult(case="c", attempt=3)
    failed.phase_add(FAILED, "AssertionError: no")
    failed.phase_add(PASSED, "passed")  # a later, better phase does not undo a failure
    assert failed.record()["passed"] is False


def test_properties_fill_trial_fields_and_the_rest_goes_to_extra_as_strict_json():
    result = TrialResult(case="t.py::test_f[a]", attempt=1, tags=["billing", "billing"])
    result.phase_add(PASSED, "passed")
    result.properties = [
        ("output", "an answer"),
        ("score", float("nan")),
        ("cost_usd", "0.0000051"),
        ("ratio", float("inf")),
        ("ids", ("d1", 2)),
        ("obj", object),
    ]
    record = result.record()
    assert record["output"] == "an answer" and record["cost_usd"] == "0.0000051"
    assert record["score"] == "NaN"  # not scored, never 0
    assert record["input"] == "t.py::test_f[a]" and record["tags"] == ["billing"]
    assert record["extra"] == {"ratio": "inf", "ids": ["d1", 2], "obj": "<class 'object'>"}
    json.dumps(record, allow_nan=False)  # strict JSON: the API refuses NaN and Infinity


def test_unstorable_text_a_test_recorded_is_replaced_and_counted_not_a_lost_run():
    """A pipeline's output holding U+0000 or a lone surrogate made the whole session
    unrecordable (the API refuses it; a surrogate even crashed the encoder): the record now
    holds U+FFFD in its place, counted in ``extra["unstorable_replaced"]``, and encodes.
    (Compared as ASCII JSON: a failure report holding a lone surrogate would crash xdist.)"""
    result = TrialResult(case="t.py::test_f", attempt=1)
    result.phase_add(ERRORED, "ValueError: bad \x00 byte")
    result.properties = [("output", "a\x00b\ud800"), ("note\udc00", {"k\x00": ["\ud83d"]})]
    record = result.record()

    def ascii_json(value) -> str:
        return json.dumps(value, sort_keys=True)

    assert ascii_json(record["output"]) == ascii_json("a\ufffdb\ufffd")
    assert ascii_json(record["error_message"]) == ascii_json("ValueError: bad \ufffd byte")
    assert ascii_json(record["extra"]) == ascii_json(
        {"note\ufffd": {"k\ufffd": ["\ufffd"]}, "unstorable_replaced": 6}
    )
    json.dumps(record, ensure_ascii=False, allow_nan=False).encode("utf-8")
    clean = TrialResult(case="t.py::test_g", attempt=1)
    clean.phase_add(PASSED, "passed")
    clean.properties = [("output", "fine \U0001f600")]
    assert "extra" not in clean.record()


def test_a_long_node_id_gets_a_short_stable_case_id_and_stays_the_input():
    long_a, long_b = "t.py::test_f[" + "a" * 300 + "]", "t.py::test_f[" + "a" * 299 + "b]"
    assert len(case_id(long_a)) == KEY_MAX and case_id(long_a) == case_id(long_a)
    assert case_id(long_a) != case_id(long_b) and case_id("t.py::test_f") == "t.py::test_f"
    result = TrialResult(case=long_a, attempt=1)
    result.phase_add(PASSED, "passed")
    assert result.record()["case_id"] == case_id(long_a)
    assert result.record()["input"] == long_a


def test_the_package_imports_no_django_and_nothing_of_the_project(tmp_path):
    project = {"django", "apitokens", "config", "core", "demo", "evals", "interop", "judges"}
    project |= {"labeling", "stats", "rest_framework", "celery"}
    code = (
        "import sys, assay_client, assay_client.gate, assay_client.trials; "
        "print(sorted({m.split('.')[0] for m in sys.modules}))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    loaded = set(ast.literal_eval(done.stdout))
    assert "httpx" in loaded and not loaded & project
