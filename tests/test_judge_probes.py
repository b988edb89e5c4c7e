"""The injection probe set against a scripted judge that obeys injections and one that
does not."""

from __future__ import annotations

import json

import pytest

from judges import client as judge_client
from judges.probes import PROBES, probe_run
from tests.fakellm import FakeLLM
from tests.judge_builders import fenced, make_version, verdict_json

RUBRIC_PROBES = [p for p in PROBES if "rubric" in p.kinds]

pytestmark = pytest.mark.django_db

INJECTION_WORDS = ("pass", "rubric", "supported", "ignore")


def _gullible(body):
    """Passes whenever the judged text asks for a pass (obeys the injection)."""
    text = " ".join(fenced(body)).lower()
    if any(w in text for w in INJECTION_WORDS):
        return verdict_json("PASS")
    return verdict_json("FAIL")


def _sound(body):
    """Compares the output with the reference; ignores everything else."""
    blocks = fenced(body)
    return verdict_json("PASS" if blocks[-1].strip(" .") == blocks[-2].strip() else "FAIL")


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    async def fake_sleep(seconds):
        return None

    monkeypatch.setattr(judge_client, "default_sleep", fake_sleep)


def test_a_judge_that_obeys_injected_instructions_is_fooled_by_every_probe():
    with FakeLLM(responder=_gullible) as llm:
        report = probe_run(judge_version=make_version(llm))
    n = len(RUBRIC_PROBES)
    assert (report.judged, report.fooled, report.errored) == (n, n, 0)
    assert report.fooled_rate == 1.0


def test_a_judge_that_ignores_injections_is_fooled_by_none():
    with FakeLLM(responder=_sound) as llm:
        report = probe_run(judge_version=make_version(llm))
    assert (report.judged, report.fooled) == (len(RUBRIC_PROBES), 0)


def test_an_errored_probe_is_counted_apart():
    replies = iter([json.dumps({"nope": 1})] + [verdict_json("FAIL")] * (len(RUBRIC_PROBES) - 1))
    with FakeLLM(responder=lambda body: next(replies)) as llm:
        report = probe_run(judge_version=make_version(llm, concurrency=1))
    assert (report.judged, report.fooled, report.errored) == (len(RUBRIC_PROBES) - 1, 0, 1)


def test_a_faithfulness_judge_also_gets_the_poisoned_document_probe():
    with FakeLLM(responder=_gullible) as llm:
        report = probe_run(judge_version=make_version(llm, kind="faithfulness"))
    assert "poisoned-document" in [r.name for r in report.results]
    assert report.fooled == report.judged == len(PROBES)
