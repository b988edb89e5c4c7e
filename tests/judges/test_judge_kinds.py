"""Every judge kind's success path on the real local server; pairwise swap (fault B2) and
position-bias figures on the shared data, computed through the selector vs from the file."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from evals.models import Grade, Run, Suite, Trial
from interop.importers import results_import
from judges import client as judge_client
from judges.models import JudgeVersion, PairwiseVerdict
from judges.pairwise import runs_pair_judge
from judges.selectors import judge_cost_get, position_bias_list
from judges.versions import judge_version_create
from tests.conftest import shared_data_file
from tests.fakellm import FakeLLM
from tests.import_helpers import PAIR_TEMPLATE, import_bytes, jsonl, record
from tests.judge_builders import fenced, judge_grade_one, make_trials, make_version, user_text

pytestmark = pytest.mark.django_db

DOCS = [
    {"id": "kb-1", "text": "Refunds are accepted within 30 days."},
    {"id": "kb-2", "text": "Shipping is free over $50."},
]


@pytest.fixture(autouse=True)
def waits(monkeypatch):
    async def fake_sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(judge_client, "default_sleep", fake_sleep)


def test_a_rubric_judge_with_a_threshold_passes_on_score(waits):
    reply = json.dumps({"reasoning": "close", "score": 0.75})
    with FakeLLM(responder=lambda body: reply) as llm:
        trial = make_trials(["Paris"])[0]

        version, _ = judge_version_create(
            judge_name="scored",
            kind="rubric",
            model="m",
            base_url=llm.base_url,
            prompt_template="",
            params={"criteria": "names the capital"},
            output_schema={},
            threshold=0.7,
        )
        grade = judge_grade_one(trial=trial, judge_version=version)
        assert "names the capital" in user_text(llm.bodies[0])
    assert (grade.passed, grade.score, grade.details["reasoning"]) == (True, 0.75, "close")


def test_a_line_format_rubric_judge_reads_the_last_verdict_line(waits):
    with FakeLLM(responder=lambda body: "PASS looks tempting.\nVERDICT: fail.") as llm:
        grade = judge_grade_one(
            trial=make_trials(["Berlin"])[0],
            judge_version=make_version(llm, reply_format="line", structured_output=False),
        )
    assert (grade.status, grade.passed) == ("ok", False)


def test_faithfulness_claim_mode_scores_the_supported_fraction_with_citations(waits):
    question = "What is the refund window? QTEXT-55"
    reply = json.dumps(
        {
            "reasoning": "r",
            "claims": [
                {"claim": "Refunds within 30 days", "supported": True, "doc_id": "doc-1"},
                {"claim": "Refunds are paid in cash", "supported": False, "doc_id": None},
            ],
        }
    )
    with FakeLLM(responder=lambda body: reply) as llm:
        trial = make_trials(
            ["Refunds within 30 days, paid in cash."], context=DOCS, input_text=question
        )[0]
        grade = judge_grade_one(
            trial=trial, judge_version=make_version(llm, kind="faithfulness_claims")
        )
        assert question not in json.dumps(llm.bodies[0])
    assert (grade.passed, grade.score, grade.reason) == (False, 0.5, "1 of 2 claims supported")
    assert grade.details["claims"][0] == {
        "claim": "Refunds within 30 days",
        "supported": True,
        "doc_id": "doc-1",
        "source_id": "kb-1",
    }


def test_faithfulness_answer_level_never_sees_the_question(waits):
    question = "What is the refund window? QTEXT-56"
    seen = []

    def judge(body):
        seen.append(json.dumps(body))
        return json.dumps({"reasoning": "all supported", "verdict": "PASS"})

    with FakeLLM(responder=judge) as llm:
        trial = make_trials(["30 days."], context=DOCS, input_text=question)[0]
        grade = judge_grade_one(trial=trial, judge_version=make_version(llm, kind="faithfulness"))
    assert question not in seen[0] and "30 days." in seen[0]
    assert (grade.status, grade.passed) == ("ok", True)


def test_context_relevance_is_shown_per_document(waits):
    def judge(body):
        assert len(fenced(body)) == 3  # the question and two documents
        return json.dumps(
            {
                "reasoning": "r",
                "documents": [
                    {"doc_id": "doc-2", "relevant": False},
                    {"doc_id": "doc-1", "relevant": True},
                ],
            }
        )

    with FakeLLM(responder=judge) as llm:
        trial = make_trials(["x"], context=DOCS, input_text="refund window?")[0]
        grade = judge_grade_one(
            trial=trial, judge_version=make_version(llm, kind="context_relevance")
        )
    assert (grade.passed, grade.score) == (True, 0.5)
    assert grade.details["documents_relevance"] == [
        {"doc_id": "doc-1", "source_id": "kb-1", "relevant": True},
        {"doc_id": "doc-2", "source_id": "kb-2", "relevant": False},
    ]


def _two_runs(base_output: str, head_output: str):
    base = make_trials([base_output], run="base")[0]
    suite = Suite.objects.get(name="S")
    head_run = Run.objects.create(
        suite=suite, name="head", target_kind="callable", status=Run.Status.SUCCEEDED
    )
    Trial.objects.create(run=head_run, case=base.case, attempt=1, status="ok", output=head_output)
    return base.run, head_run


def test_fault_b2_an_order_dependent_pairwise_answer_is_a_tie(waits):
    always_a = json.dumps({"reasoning": "first is better", "verdict": "A"})
    with FakeLLM(responder=lambda body: always_a) as llm:
        base, head = _two_runs("The capital of France is Paris.", "The capital of France is Paris.")
        version = make_version(llm, kind="pairwise")
        tally = runs_pair_judge(base=base, head=head, judge_version=version)
        assert llm.requests == 2
        again = runs_pair_judge(base=base, head=head, judge_version=version)
        assert llm.requests == 2  # idempotent: both presentations are stored
    assert (tally.head_wins, tally.base_wins, tally.ties) == (0, 0, 1)
    assert again == tally
    verdicts = dict(PairwiseVerdict.objects.values_list("position", "preferred"))
    assert verdicts == {"original": "A", "swapped": "B"}  # base wins, then head wins
    [bias] = position_bias_list(judge_version_ids=[version.id])
    assert (bias.first_slot_wins, bias.presentations) == (2, 2)
    assert bias.first_slot_rate == 1.0
    assert (bias.pairs_consistent, bias.pairs_both) == (0, 1)


def test_a_pairwise_judge_consistent_in_both_orders_counts_a_head_win(waits):
    def prefers_paris(body):
        a, b = fenced(body)[1:3]
        return json.dumps({"reasoning": "r", "verdict": "A" if "Paris" in a else "B"})

    with FakeLLM(responder=prefers_paris) as llm:
        base, head = _two_runs("Berlin.", "Paris.")
        tally = runs_pair_judge(
            base=base, head=head, judge_version=make_version(llm, kind="pairwise")
        )
    assert (tally.head_wins, tally.base_wins, tally.ties) == (1, 0, 0)


def test_an_imported_order_inconsistent_record_counts_as_inconsistent():
    import_bytes(jsonl([record(PAIR_TEMPLATE)]))
    [bias] = position_bias_list()
    assert (bias.pairs_consistent, bias.pairs_both) == (0, 1)
    assert (bias.first_slot_wins, bias.presentations) == (2, 2)


@pytest.mark.parametrize("name", ["llmbar", "humanpref_pairs"])
def test_position_bias_of_imported_shared_data_matches_the_file(name):
    path = shared_data_file(name)
    with path.open("rb") as stream:
        results_import(stream=stream, filename=path.name, suite_name=name, run_name="shared")
    expected: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line:
            continue
        rec = json.loads(line)
        per_judge = defaultdict(dict)
        for jl in rec["judge_labels"]:
            per_judge[(jl["judge_model"], jl["protocol"])][jl["position"]] = jl["value"]
        for judge, positions in per_judge.items():
            figures = expected[judge]
            for position, value in positions.items():
                if value is not None:
                    figures[2] += 1
                    figures[3] += (position, value) in (("original", "A"), ("swapped", "B"))
            if positions.get("original") and positions.get("swapped"):
                figures[1] += 1
                figures[0] += positions["original"] == positions["swapped"]
    got = {}
    for bias in position_bias_list():
        version = JudgeVersion.objects.get(pk=bias.judge_version_id)
        got[(version.model, version.protocol)] = [
            bias.pairs_consistent,
            bias.pairs_both,
            bias.presentations,
            bias.first_slot_wins,
        ]
    assert got == dict(expected)
    assert len(got) >= 1


def test_recorded_verdicts_fit_the_same_selectors():
    import_bytes(jsonl([record()]))
    version = JudgeVersion.objects.get()
    assert Grade.objects.filter(judge_version=version).count() == 1
    cost = judge_cost_get(judge_version=version)
    assert (cost.grades, cost.known_usd, cost.unknown) == (1, None, 1)
