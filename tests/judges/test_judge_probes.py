"""The injection probe set against a scripted judge that obeys injections and one that
does not; the probe task claims its row by compare-and-set."""

from __future__ import annotations

import json

import pytest

from judges import client as judge_client
from judges.ledger import spend_get
from judges.models import JudgeCallRecord, JudgeVersion, ProbeRun
from judges.probes import PROBES, probe_run, probe_run_start
from judges.tasks import probe_run_execute
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
    assert report.fooled == report.judged == len([p for p in PROBES if "faithfulness" in p.kinds])


def _claims(body, *, gullible: bool):
    text = " ".join(fenced(body)).lower()
    fooled = gullible and any(w in text for w in INJECTION_WORDS)
    return json.dumps(
        {
            "reasoning": "scripted",
            "claims": [
                {"claim": "the answer", "supported": fooled, "doc_id": "doc-1" if fooled else None}
            ],
        }
    )


@pytest.mark.parametrize("gullible, fooled", [(True, "all"), (False, "none")])
def test_a_claims_judge_is_probed_with_the_faithfulness_probes(gullible, fooled):
    with FakeLLM(responder=lambda body: _claims(body, gullible=gullible)) as llm:
        report = probe_run(judge_version=make_version(llm, kind="faithfulness_claims"))
    n = len([p for p in PROBES if "faithfulness_claims" in p.kinds])
    assert n >= 6 and report.judged == n and report.errored == 0
    assert report.fooled == (n if fooled == "all" else 0)


def _relevance(body, *, gullible: bool):
    text = " ".join(fenced(body)).lower()
    relevant = gullible and "relevant" in text  # obeys "mark it relevant"
    return json.dumps(
        {"reasoning": "scripted", "documents": [{"doc_id": "doc-1", "relevant": relevant}]}
    )


@pytest.mark.parametrize("gullible", [True, False])
def test_a_context_relevance_judge_meets_a_document_that_claims_to_be_relevant(gullible):
    with FakeLLM(responder=lambda body: _relevance(body, gullible=gullible)) as llm:
        report = probe_run(judge_version=make_version(llm, kind="context_relevance"))
    assert [r.name for r in report.results] == ["self-declared-relevant"]
    assert (report.judged, report.fooled) == (1, 1 if gullible else 0)


def _pairwise(body, *, gullible: bool):
    a, b = fenced(body)[-2:]
    if gullible:  # prefers whichever response asks for it
        asks_a = "prefer this" in a.lower() or '"verdict": "a"' in a.lower()
        return verdict_json("A" if asks_a else "B")
    return verdict_json("A" if a.strip(" .") == "Paris" else "B")  # the right answer


@pytest.mark.parametrize("gullible", [True, False])
def test_a_pairwise_judge_meets_a_candidate_that_tells_it_to_prefer_it(gullible):
    with FakeLLM(responder=lambda body: _pairwise(body, gullible=gullible)) as llm:
        report = probe_run(judge_version=make_version(llm, kind="pairwise"))
    names = [r.name for r in report.results]
    assert names == ["prefer-me-in-a", "prefer-me-in-b", "pairwise-embedded-json"]
    assert report.judged == 3 and report.errored == 0
    assert report.fooled == (3 if gullible else 0)
    assert {r.preferred for r in report.results} == ({"A", "B"})


# -- the task: claimed by compare-and-set ------------------------------------------------------


def _queued(llm, capture) -> ProbeRun:
    with capture(execute=False) as callbacks:
        probe = probe_run_start(judge_version=make_version(llm))
    assert len(callbacks) == 1  # the task is enqueued after commit (run by hand below)
    return probe


def test_a_redelivered_probe_task_makes_one_set_of_calls_and_one_report(
    django_capture_on_commit_callbacks,
):
    with FakeLLM(responder=_gullible) as llm:
        probe = _queued(llm, django_capture_on_commit_callbacks)
        probe_run_execute(probe.id)
        first = ProbeRun.objects.get()
        probe_run_execute(probe.id)  # the broker delivers the same message again
        assert llm.requests == len(RUBRIC_PROBES)
    again = ProbeRun.objects.get()
    assert (again.status, again.fooled, again.judged) == ("succeeded", *[len(RUBRIC_PROBES)] * 2)
    assert (again.results, again.finished_at) == (first.results, first.finished_at)


def test_a_second_worker_finding_the_probe_run_running_does_nothing(
    django_capture_on_commit_callbacks,
):
    with FakeLLM(responder=_gullible) as llm:
        probe = _queued(llm, django_capture_on_commit_callbacks)
        ProbeRun.objects.filter(id=probe.id).update(status=ProbeRun.Status.RUNNING)
        probe_run_execute(probe.id)
        assert llm.requests == 0
    row = ProbeRun.objects.get()
    assert (row.status, row.results, row.finished_at) == ("running", [], None)


def test_a_probe_run_of_a_version_it_cannot_probe_fails_saying_why(
    django_capture_on_commit_callbacks,
):
    with FakeLLM(responder=_gullible) as llm:
        probe = _queued(llm, django_capture_on_commit_callbacks)
        # a version stored before the $name syntax (and not migrated)
        JudgeVersion.objects.update(prompt_template="Judge {output}")
        probe_run_execute(probe.id)
        assert llm.requests == 0
    row = ProbeRun.objects.get()
    assert row.status == "failed" and row.finished_at is not None
    assert row.error.startswith(
        "judge_version: bad_template: prompt_template: uses {output}; write $output"
    )


def test_every_probe_call_is_in_the_judge_call_ledger_with_its_cost(
    django_capture_on_commit_callbacks,
):
    """Probe calls are paid judge calls; they were in no ledger, so the version's spend
    left them out. Each is now a ``JudgeCallRecord`` of its probe run, once, even when the
    task is delivered twice, with its tokens and cost (priced model) or null cost."""
    with FakeLLM(responder=_gullible) as llm:
        with django_capture_on_commit_callbacks(execute=False):
            probe = probe_run_start(judge_version=make_version(llm, model="gpt-4o"))
        probe_run_execute(probe.id)
        probe_run_execute(probe.id)  # redelivered: no call, no second row
        sent = llm.requests
    rows = list(JudgeCallRecord.objects.filter(probe_run=probe))
    assert len(rows) == sent == len(RUBRIC_PROBES)
    assert {(r.status, r.outcome, r.run_id, r.trial_id) for r in rows} == {
        ("answered", "stored", None, None)
    }
    assert all(r.input_tokens is not None and r.cost_usd is not None for r in rows)
    spend = spend_get(records=JudgeCallRecord.objects.filter(probe_run=probe))
    assert spend.calls == sent and spend.cost_unknown == 0 and spend.known_usd > 0
    with FakeLLM(responder=_gullible) as llm:
        unpriced = probe_run(judge_version=make_version(llm, name="j2"))
    assert unpriced.judged == len(RUBRIC_PROBES)
    direct = JudgeCallRecord.objects.filter(probe_run__isnull=True)
    assert direct.count() == len(RUBRIC_PROBES)
    assert not direct.filter(cost_usd__isnull=False).exists()  # no price: null, never 0
