"""The run report's agent block: outcome (``state``) × trajectory (``trajectory``), the 2 × 2
overall and per case, disagreements grouped by reason, the page, ``run_report --json``,
sending disagreements to a review queue, and a query count that does not grow with size."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from core.errors import DomainError
from evals.comparison.agents import agent_moves_get
from evals.models import Grade, Trial
from evals.report.agents import (
    RIGHT_OUTCOME_WRONG_PATH,
    WRONG_OUTCOME_EXPECTED_PATH,
    run_disagreements,
)
from evals.report.selectors import run_report
from labeling.disagreements import disagreement_queue_create
from labeling.models import CalibrationSet
from tests.report_builders import ERR, make_run

pytestmark = pytest.mark.django_db

AGENT_GRADERS = [
    {"key": "outcome", "kind": "state"},
    {"key": "path", "kind": "trajectory", "config": {"required": ["lookup_order"]}},
]
BEFORE = "forbidden tool `issue_refund` before `lookup_order`"
STATUS = "different `order.status`"


def _grade(trial, key, verdict, group=""):
    errored = verdict is ERR
    Grade.objects.create(
        trial=trial,
        grader=key,
        gating=key == "outcome",
        status="error" if errored else "ok",
        passed=None if errored else verdict,
        score=None if errored else float(verdict),
        reason=f"<b>{group}</b> at step 2" if group else "ok",
        details={"group": group} if group else {},
    )


def agent_run(plan: dict[str, list[tuple]], *, name="R1", graders=AGENT_GRADERS):
    """A run whose case ``key`` has one trial per ``(outcome, path)`` pair in ``plan[key]``
    (True, False or ERR); failing sides carry the group texts above."""
    run = make_run(cases=[(k, []) for k in plan], graders=graders, n=4, name=name)
    for key, trials in plan.items():
        case = run.suite.cases.get(key=key)
        for attempt, (outcome, path) in enumerate(trials, 1):
            trial = Trial.objects.create(
                run=run, case=case, attempt=attempt, status="ok", output="done"
            )
            _grade(trial, "outcome", outcome, "" if outcome is not False else STATUS)
            _grade(trial, "path", path, "" if path is not False else BEFORE)
    return run


PLAN = {
    "c1": [(True, True), (True, False), (True, False), (False, True)],
    "c2": [(True, True), (False, False), (ERR, True), (False, True)],
}


def test_the_two_by_two_and_the_groups():
    run = agent_run(PLAN)
    agents = run_report(run=run).to_dict()["agents"]
    cells = ("both_pass", "outcome_only", "path_only", "both_fail")
    assert [agents[c]["trials"] for c in cells] == [2, 2, 2, 1]
    assert agents["in_table"] == 7 and agents["left_out"] == 1 and agents["disagreements"] == 4
    # shares: mean over cases of per-case shares (c1: 2/4, c2: 0/3 for outcome_only)
    assert agents["outcome_only"]["share"] == pytest.approx((2 / 4 + 0 / 3) / 2)
    assert (
        agents["outcome_only"]["low"]
        < agents["outcome_only"]["share"]
        < agents["outcome_only"]["high"]
    )
    groups = {(g["kind"], g["label"]): g for g in agents["groups"]}
    right = groups[(RIGHT_OUTCOME_WRONG_PATH, f"right outcome via {BEFORE}")]
    wrong = groups[(WRONG_OUTCOME_EXPECTED_PATH, f"outcome fail on the expected path: {STATUS}")]
    assert right["count"] == 2 and wrong["count"] == 2
    assert {t["case_key"] for t in wrong["trials"]} == {"c1", "c2"}
    assert "trial_ids" not in right
    c1 = next(c for c in agents["cases"] if c["key"] == "c1")
    assert (c1["both_pass"], c1["outcome_only"], c1["path_only"], c1["both_fail"]) == (1, 2, 1, 0)
    assert c1["disagreement_rate"] == 0.75 and c1["disagreements"] == 3
    assert c1["disagreement_interval"][0] < 0.75 < c1["disagreement_interval"][1]
    # outcome figures: c1 3/4, c2 1/3 (the errored outcome is out); the verdict is the outcome
    assert agents["outcome"]["trials_passed"] == 4 and agents["outcome"]["trials_graded"] == 7
    report = run_report(run=run)
    assert report.overall.trials_passed == agents["outcome"]["trials_passed"]
    assert agents["path"]["gating"] is False


def test_no_block_without_both_agent_kinds():
    plain = make_run(cases=[("c1", [])], graders=[{"key": "a", "kind": "exact"}], name="plain")
    assert run_report(run=plain).agents is None
    only_state = agent_run({"c1": [(True, True)]}, name="s", graders=AGENT_GRADERS[:1])
    assert run_report(run=only_state).agents is None


def test_query_count_does_not_grow_with_size():
    small = agent_run({f"s{i}": [(True, False), (False, True)] for i in range(2)}, name="small")
    big = agent_run(
        {f"b{i}": [(True, False), (False, True), (True, True), (False, False)] for i in range(8)},
        name="big",
    )
    counts = []
    for run in (small, big):
        run = type(run).objects.select_related("suite").get(pk=run.pk)
        with CaptureQueriesContext(connection) as ctx:
            run_report(run=run)
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1]
    plain = make_run(cases=[("p1", [])], graders=[{"key": "a", "kind": "exact"}], name="plain")
    plain = type(plain).objects.select_related("suite").get(pk=plain.pk)
    with CaptureQueriesContext(connection) as ctx:
        run_report(run=plain)
    assert counts[0] == len(ctx.captured_queries) + 1  # the agent block's one query


def test_the_page_shows_the_block_escaped_and_the_json_has_it(client, carol):
    run = agent_run(PLAN)
    client.force_login(carol)
    html = client.get(reverse("evals:run-detail", kwargs={"run_id": run.uuid})).content.decode()
    assert 'id="agent-2x2"' in html
    assert "right outcome via forbidden tool `issue_refund` before `lookup_order`" in html
    assert "&lt;b&gt;" in html and "<b>forbidden" not in html
    assert 'id="disagreements-review-all"' in html
    out = io.StringIO()
    call_command("run_report", str(run.uuid), "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["agents"]["outcome_only"]["trials"] == 2
    text = io.StringIO()
    call_command("run_report", str(run.uuid), stdout=text)
    assert "outcome pass, trajectory fail: 2" in text.getvalue()
    assert f"2 x right outcome via {BEFORE}" in text.getvalue()


def test_a_reviewer_sees_the_page_without_the_send_button(client, bob):
    run = agent_run(PLAN)
    client.force_login(bob)
    html = client.get(reverse("evals:run-detail", kwargs={"run_id": run.uuid})).content.decode()
    assert 'id="agent-2x2"' in html and "disagreements-review-all" not in html


def test_disagreements_go_to_a_review_queue_all_or_one_group(client, alice, bob):
    run = agent_run(PLAN)
    report = run_disagreements(run=run)
    every = set(report.disagreement_ids[RIGHT_OUTCOME_WRONG_PATH]) | set(
        report.disagreement_ids[WRONG_OUTCOME_EXPECTED_PATH]
    )
    client.force_login(alice)
    url = reverse("labeling:disagreements-review", kwargs={"run_id": run.uuid})
    response = client.post(url)
    assert response.status_code == 302
    cset = CalibrationSet.objects.get()
    assert set(cset.items.values_list("trial_id", flat=True)) == every
    assert cset.design["kind"] == "agent_disagreements"
    label = f"right outcome via {BEFORE}"
    client.post(url, {"kind": RIGHT_OUTCOME_WRONG_PATH, "label": label})
    group_set = CalibrationSet.objects.exclude(pk=cset.pk).get()
    assert set(group_set.items.values_list("trial_id", flat=True)) == set(
        report.disagreement_ids[RIGHT_OUTCOME_WRONG_PATH]
    )
    client.force_login(bob)
    assert client.post(url).status_code == 403
    with pytest.raises(DomainError) as info:
        disagreement_queue_create(run=run, by=alice, kind="nonsense")
    assert info.value.field == "kind"
    agreeing = agent_run({"c9": [(True, True)]}, name="agree")
    with pytest.raises(DomainError) as info:
        disagreement_queue_create(run=agreeing, by=alice)
    assert info.value.field == "run"


def test_the_comparison_shows_how_outcome_and_trajectory_moved_per_case(client, carol):
    base = agent_run({"c1": [(True, True), (True, True), (False, True), (True, False)]})
    head = agent_run({"c1": [(True, False), (True, False), (True, False), (True, True)]}, name="R2")
    moves = agent_moves_get(base=base, head=head)
    assert moves.n_cases == 1
    (case,) = moves.cases
    assert (case.outcome.base_passed, case.outcome.base_graded) == (3, 4)
    assert (case.outcome.head_passed, case.outcome.head_graded) == (4, 4)
    assert case.outcome.delta == pytest.approx(0.25)
    assert case.trajectory.delta == pytest.approx(0.25 - 0.75)
    assert case.trajectory.head_interval[0] < 0.25 < case.trajectory.head_interval[1]
    assert moves.outcome_head.ci_low < moves.outcome_head.ci_high
    client.force_login(carol)
    url = reverse("evals:comparison", kwargs={"head_id": head.uuid, "base_id": base.uuid})
    html = client.get(url).content.decode()
    assert 'id="agent-case-moves"' in html and "−50.0 pts" in html
    plain = make_run(cases=[("c1", [])], graders=[{"key": "a", "kind": "exact"}], name="plain")
    with CaptureQueriesContext(connection) as ctx:
        assert agent_moves_get(base=plain, head=head) is None
        assert agent_moves_get(base=head, head=plain) is None
    assert ctx.captured_queries == []  # the grader sets say so before any trial is read


def test_a_reviewer_in_the_disagreement_queue_is_blind_to_the_disagreements(client, alice, bob):
    run = agent_run(PLAN)
    disagreement_queue_create(run=run, by=alice)
    client.force_login(bob)
    html = client.get(reverse("evals:run-detail", kwargs={"run_id": run.uuid})).content.decode()
    assert 'id="agent-2x2"' not in html  # totals too: the hidden cells by subtraction
    assert 'id="agent-cases"' not in html and "forbidden tool" not in html
    api = APIClient()
    api.force_authenticate(bob)
    assert api.get(f"/api/runs/{run.uuid}/").json()["report"]["agents"] is None
    api.force_authenticate(alice)
    assert api.get(f"/api/runs/{run.uuid}/").json()["report"]["agents"]["disagreements"] == 4


def test_an_errored_trial_is_neither_pass_nor_fail_and_is_counted_apart():
    run = agent_run({"c1": [(True, True), (False, True)], "c2": [(True, False)]})
    case = run.suite.cases.get(key="c1")
    Trial.objects.create(
        run=run, case=case, attempt=3, status="error", error_message="step_cap: <b>x</b>"
    )
    agents = run_report(run=run).to_dict()["agents"]
    assert agents["in_table"] == 3 and agents["left_out"] == 0
    assert agents["errored_trials"] == 1
    c1 = next(c for c in agents["cases"] if c["key"] == "c1")
    assert (c1["both_pass"], c1["path_only"], c1["errored"]) == (1, 1, 1)
    assert c1["outcome_rate"] == 0.5  # 1 of 2 graded: the errored trial is not a fail
    assert agents["outcome"]["pipeline_errored"] == 1
    out = io.StringIO()
    call_command("run_report", str(run.uuid), stdout=out)
    assert "1 errored trial, neither pass nor fail" in out.getvalue()


def test_a_double_clicked_send_makes_one_review_queue(client, alice):
    """Sending the same disagreements twice (a double click, or a second engineer) gives the
    reviewers one queue, and the second answer says it already exists."""
    run = agent_run(PLAN)
    client.force_login(alice)
    url = reverse("labeling:disagreements-review", kwargs={"run_id": run.uuid})
    first = client.post(url, {"kind": RIGHT_OUTCOME_WRONG_PATH})
    second = client.post(url, {"kind": RIGHT_OUTCOME_WRONG_PATH}, follow=True)
    assert first.status_code == 302
    cset = CalibrationSet.objects.get()
    assert first["Location"].endswith(f"/{cset.uuid}/")
    assert second.redirect_chain[-1][0].endswith(f"/{cset.uuid}/")
    assert "already in review queue" in second.content.decode()
    again, created = disagreement_queue_create(run=run, by=alice, kind=RIGHT_OUTCOME_WRONG_PATH)
    assert (again.pk, created) == (cset.pk, False)
    # Another group (or all of them) is another queue.
    client.post(url)
    assert CalibrationSet.objects.count() == 2


def test_a_disagreement_queue_says_how_it_was_drawn(client, alice):
    """Its page read "a plan for the false-accept rate of None: ... strata by its verdict"
    (the sampling plan's sentence) and the list "tags only": it is every disagreeing trial."""
    run = agent_run(PLAN)
    cset, _ = disagreement_queue_create(run=run, by=alice, kind=RIGHT_OUTCOME_WRONG_PATH)
    client.force_login(alice)
    page = client.get(reverse("labeling:set-detail", kwargs={"set_id": cset.uuid})).content
    html = page.decode()
    assert "false-accept rate of None" not in html and "strata by its verdict" not in html
    assert "whose outcome and path disagree (right outcome, wrong path)" in html
    listed = client.get(reverse("labeling:set-list")).content.decode()
    assert "outcome and path disagree" in listed and "tags only" not in listed


def test_the_disagreement_queue_shows_the_reviewer_the_path_and_the_states_blind(
    client, alice, bob
):
    """A reviewer asked whether an agent's path or its spec is wrong saw only its input and
    final message: the queue now shows the trajectory and the final state beside the goal
    (escaped), and still no verdict."""
    run = agent_run({"c1": [(True, False)]})
    trial = Trial.objects.get(run=run)
    Trial.objects.filter(id=trial.id).update(
        trajectory=[
            {"kind": "tool_call", "name": "issue_refund", "arguments": {"note": "<b>x</b>"}},
            {"kind": "tool_result", "name": "issue_refund", "content": "ok", "status": "ok"},
        ],
        final_state={"refunds": ["<i>A1</i>"]},
    )
    trial.case.__class__.objects.filter(id=trial.case_id).update(goal_state={"refunds": []})
    cset, _ = disagreement_queue_create(run=run, by=alice)
    client.force_login(bob)
    html = client.get(reverse("labeling:queue", kwargs={"set_id": cset.uuid})).content.decode()
    assert 'id="trajectory"' in html and "issue_refund" in html
    assert 'id="queue-final-state"' in html and 'id="queue-goal-state"' in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
    assert "&lt;i&gt;A1&lt;/i&gt;" in html and "<i>A1</i>" not in html
    assert BEFORE not in html and "forbidden tool" not in html  # blind: no grade reason


def test_a_group_of_one_says_send_this_one(client, carol):
    run = agent_run({"c1": [(True, True), (True, False)], "c2": [(False, True), (False, True)]})
    client.force_login(carol)
    html = client.get(reverse("evals:run-detail", kwargs={"run_id": run.uuid})).content.decode()
    assert "Send this one to a review queue" in html and "Send these 1 " not in html
    assert "Send these 2 to a review queue" in html
