"""Blind reviewing over groups (``evals.blindness``): paired data in the LLMBar shape.

Two LLMBar pairs, each unpacked as the pointwise dataset does into ``…:A`` and ``…:B``
records with the same input and opposite gold labels, are imported with the real importer
into run ``r`` of suite ``llmbar``, again into run ``r2`` of the same suite (the same
cases: other runs of the input) and into suite ``mirror`` (the same inputs in another
suite). A calibration set on ``r`` holds only the B side of each pair, as the demo's set
holds one side; a deterministic (outcome-like) grade sits on a sibling of ``r2``; dave, a
second reviewer, labeled every A side. Bob (reviewer) labeled one item and has one left.

While he has items left, no page, export or API shows him a verdict, a gold label, a gold
reason or dave's label of any trial sharing an input with an item (the siblings and the
items in every run and suite); once he has labeled every item, the ordinary rule applies.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.contrib.auth.models import Group, User

from evals.blindness import blind_trial_ids
from evals.models import Case, Grade, Run, Suite, Trial
from judges.models import JudgeVersion
from labeling.models import Label
from tests.conftest import PASSWORD
from tests.import_helpers import PAIR_TEMPLATE, import_bytes, jsonl, record
from tests.labeling_builders import calibration_set
from tests.page_text import visible_text

pytestmark = pytest.mark.django_db

METHOD = "LLMBar gold: GOLD-METHOD"  # in every gold grade's reason: human label (<method>)
PAIRS = 2


def _records() -> list[dict]:
    out = []
    for i in range(PAIRS):
        for side, gold, judge in (("A", "fail", "pass"), ("B", "pass", "fail")):
            out.append(
                record(
                    id=f"llmbar_pointwise:adversarial:{i:04d}:{side}",
                    dataset="llmbar_pointwise",
                    category="LLMBar/Adversarial",
                    tags=["derived_from_pairwise"],
                    input=f"Explain the idiom number {i}.",
                    responses=[{"response_id": "R", "model": None, "text": f"answer {i}{side}"}],
                    human_label={
                        "type": "pass_fail",
                        "value": gold,
                        "method": METHOD,
                        "details": {
                            "pair_id": f"llmbar:adversarial:{i:04d}",
                            "pair_position": side,
                            "critique": f"GOLD-CRIT-{i}{side}",
                        },
                    },
                    judge_labels=[
                        {
                            "judge_model": "gpt-4",
                            "judge_type": "llm",
                            "protocol": "Rating",
                            "position": None,
                            "value": judge,
                            "score": 7 if judge == "pass" else 2,
                            "rationale": f"JUDGE-WHY-{i}{side}",
                        }
                    ],
                )
            )
    return out


LEAKS = ("GOLD-METHOD", "GOLD-CRIT-", "JUDGE-WHY-", "DAVE-", "OUTCOME-WHY")


@pytest.fixture
def world(db, bob):
    data = jsonl(_records())
    import_bytes(data, suite="llmbar", run="r")
    import_bytes(data, suite="llmbar", run="r2")
    import_bytes(data, suite="mirror", run="m")
    runs = {name: Run.objects.get(name=name) for name in ("r", "r2", "m")}
    trials = {
        (name, t.case.key[-1], int(t.case.key.split(":")[2])): t
        for name, run in runs.items()
        for t in Trial.objects.filter(run=run).select_related("case")
    }
    sibling = trials[("r2", "A", 1)]
    Grade.objects.create(trial=sibling, grader="outcome", passed=True, reason="OUTCOME-WHY")
    dave = User.objects.create_user(username="dave", password=PASSWORD)
    dave.groups.add(Group.objects.get(name="reviewer"))
    for (_, side, i), t in trials.items():
        if side == "A":
            Label.objects.create(trial=t, reviewer=dave, verdict="fail", critique=f"DAVE-{i}{side}")
    items = [trials[("r", "B", i)] for i in range(PAIRS)]
    calibration_set(runs["r"], JudgeVersion.objects.get(), items)
    Label.objects.create(trial=items[0], reviewer=bob, verdict="pass", critique="BOB-OWN")
    return {"runs": runs, "trials": trials, "items": items}


def _urls(world) -> list[str]:
    runs, trials = world["runs"], world["trials"]
    r, r2 = runs["r"], runs["r2"]
    # Every trial's page; the other per-trial and per-case surfaces for pair 1 (the item
    # bob has not labeled yet), whose cases stand for the others.
    pair = [t for (_, _, i), t in trials.items() if i == 1]
    urls = [f"/trials/{t.uuid}/" for t in trials.values()]
    urls += [f"/api/trials/{t.uuid}/" for t in pair]
    urls += [f"/runs/{t.run.uuid}/cases/{t.case.uuid}/" for t in pair]
    for run in runs.values():
        urls += [
            f"/runs/{run.uuid}/",
            f"/api/runs/{run.uuid}/",
            f"/runs/{run.uuid}/export/?format=csv",
            f"/api/runs/{run.uuid}/export",
            f"/api/runs/{run.uuid}/export?format=json",
            f"/runs/{run.uuid}/labels/export/?format=csv",
            f"/api/runs/{run.uuid}/labels-export",
            f"/api/grades/?run={run.uuid}",
            f"/api/trials/?run={run.uuid}",
        ]
    for suite in Suite.objects.all():
        urls += [
            f"/suites/{suite.uuid}/",
            f"/suites/{suite.uuid}/grid/",
            f"/suites/{suite.uuid}/grid/export/?format=csv",
            f"/suites/{suite.uuid}/cost-quality.svg",
        ]
        urls += [
            f"/suites/{suite.uuid}/cases/{t.case.uuid}/history/"
            for t in pair
            if t.run.suite_id == suite.id and t.run.name != "r2"
        ]
    urls += [
        f"/runs/{r2.uuid}/compare/{r.uuid}/",
        f"/runs/{r2.uuid}/compare/{r.uuid}/export/?format=csv",
        f"/api/comparisons/?base={r.uuid}&head={r2.uuid}",
    ]
    urls += [f"/runs/{r2.uuid}/compare/{r.uuid}/cases/{t.case.uuid}/" for t in pair if t.run == r]
    return [*urls, "/api/labels/", "/api/grades/", "/api/trials/"]


def _shown(response) -> str:
    body = b"".join(response.streaming_content) if response.streaming else response.content
    text = body.decode()
    return visible_text(text) if response["Content-Type"].startswith("text/html") else text


def _leaks(client, urls) -> list[tuple[str, int, str]]:
    found = []
    for url in urls:
        response = client.get(url)
        assert response.status_code in (200, 403), (url, response.status_code)
        text = _shown(response)
        found += [(url, response.status_code, word) for word in LEAKS if word in text]
    return found


def test_a_reviewer_with_items_left_sees_nothing_of_any_trial_in_an_items_group(client, world, bob):
    client.force_login(bob)
    assert _leaks(client, _urls(world)) == []
    # No grade of any of the 18 trials (every one shares an input with an item) is listed,
    # and the run's CSV holds no verdict cell.
    assert client.get("/api/grades/").json()["results"] == []
    export = client.get(f"/runs/{world['runs']['r'].uuid}/export/?format=csv")
    rows = list(csv.DictReader(io.StringIO(_shown(export))))
    assert len(rows) == 2 * PAIRS
    assert all(v == "" for row in rows for k, v in row.items() if k.endswith(".passed"))
    # His own label is still his to read.
    assert "BOB-OWN" in json.dumps(client.get("/api/labels/").json())


def test_once_the_set_is_done_the_ordinary_rule_applies(client, world, bob):
    for item in world["items"][1:]:
        Label.objects.create(trial=item, reviewer=bob, verdict="fail", critique="BOB-MORE")
    client.force_login(bob)
    sibling = world["trials"][("r2", "A", 1)]
    page = visible_text(client.get(f"/trials/{sibling.uuid}/").content.decode())
    assert "GOLD-METHOD" in page and "JUDGE-WHY-1A" in page and "OUTCOME-WHY" in page
    assert "blind-note" not in client.get(f"/trials/{sibling.uuid}/").content.decode()
    grades = client.get("/api/grades/?page_size=100").json()["results"]
    assert len(grades) == Grade.objects.count() == 2 * len(world["trials"]) + 1
    # Other reviewers' and gold labels stay hidden from a reviewer whatever the sets.
    leaks = _leaks(client, _urls(world))
    assert {word for _, _, word in leaks} == {"GOLD-METHOD", "JUDGE-WHY-", "OUTCOME-WHY"}


def test_the_other_side_of_a_preference_pair_is_blind_with_its_item(bob):
    import_bytes(jsonl([record(PAIR_TEMPLATE)]), suite="prefs", run="p")
    side_a, side_b = (Trial.objects.get(run__name=f"p / {s}") for s in "AB")
    calibration_set(side_a.run, None, [side_a])
    assert blind_trial_ids(bob) == {side_a.id, side_b.id}
    Label.objects.create(trial=side_a, reviewer=bob, verdict="pass")
    assert blind_trial_ids(bob) == frozenset()


def test_a_group_is_the_input_with_its_documents_whatever_the_expected_answer(bob):
    suite = Suite.objects.create(name="docs")
    run = Run.objects.create(suite=suite, name="r", status=Run.Status.SUCCEEDED)
    doc = [{"id": "d1", "text": "the refund window is 30 days"}]

    def trial(key, *, expected, context):
        case = Case.objects.create(
            suite=suite, key=key, input="Summarize.", expected=expected, context=context
        )
        return Trial.objects.create(run=run, case=case, attempt=1, status="ok", output="o")

    item = trial("item", expected="30 days", context=doc)
    edited = trial("edited", expected="thirty days", context=doc)  # same question
    trial("other", expected="30 days", context=[{"id": "d2", "text": "other"}])  # not blind
    calibration_set(run, None, [item])
    assert blind_trial_ids(bob) == {item.id, edited.id}


def test_a_runs_totals_are_withheld_so_the_hidden_verdicts_cannot_be_subtracted(client, bob, carol):
    # Three unique inputs; the set holds one. The run's totals minus the visible rows would
    # give the item's gold label and judge verdict, so no total of verdicts is shown to bob
    # on the run page, the run list or the API; carol (engineer) sees them all.
    records = [
        record(
            id=f"solo:{i}",
            dataset="solo",
            input=f"Unique question {i}.",
            responses=[{"response_id": "R", "model": None, "text": f"answer {i}"}],
            human_label={
                "type": "pass_fail",
                "value": "pass" if i else "fail",
                "method": "m",
                "details": {},
            },
            judge_labels=[
                {
                    "judge_model": "gpt-4",
                    "judge_type": "llm",
                    "protocol": "Rating",
                    "position": None,
                    "value": "pass" if i else "fail",
                    "score": None,
                    "rationale": "r",
                }
            ],
        )
        for i in range(3)
    ]
    import_bytes(jsonl(records), suite="solo", run="s")
    run = Run.objects.get(name="s")
    item = Trial.objects.get(run=run, case__key="solo:0")
    calibration_set(run, JudgeVersion.objects.get(), [item])
    client.force_login(bob)
    report = client.get(f"/api/runs/{run.uuid}/").json()["report"]
    assert report["blind"] is True
    assert all(report[k] is None for k in ("overall", "graders", "cost_quality", "cases"))
    page = visible_text(client.get(f"/runs/{run.uuid}/").content.decode())
    assert "graded trials passed" not in page and "pass^k" not in page
    assert "Pass rates, decisions, cases, slices and failure reasons" in page
    listed = visible_text(client.get("/runs/").content.decode())
    assert "hidden while you label" in listed and "graded trials passed" not in listed
    client.force_login(carol)
    report = client.get(f"/api/runs/{run.uuid}/").json()["report"]
    assert report["overall"]["trials_passed"] == 2
    assert "graded trials passed" in visible_text(client.get("/runs/").content.decode())
