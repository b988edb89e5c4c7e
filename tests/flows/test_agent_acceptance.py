"""Issue 15's "Done when", end to end through the real surfaces: four sources of agent trials
(a callable agent, a tool-loop agent against the shared mock and against a scripted
tool-calling server, an imported Inspect log, an ingested run), each graded by ``state`` and
``trajectory`` graders, with the 2 × 2 in ``run_report --json`` and on the run page, and the
trajectory on the trial page. The suite, targets and grader set come from config as code
(``examples/agent.toml``, shown in docs/config.md); caps show as errored trials that the 2 × 2
leaves out and counts; hostile text is escaped everywhere it is shown."""

from __future__ import annotations

import json
import re
import shutil
from io import StringIO

import pytest
from django.core.management import call_command

from core.errors import DomainError
from evals.models import Case, Run, Trial
from interop.config import config_apply
from providers.models import ModelPrice
from tests.conftest import PROJECT_DIR
from tests.fakellm import FakeLLM, tool_calls_message
from tests.interop.test_api_ingest import client_for, post_json
from tests.mockllm import mockllm  # noqa: F401 - the fixture

# run_suite --wait runs the run in on_commit callbacks: a transactional test (the roles'
# groups, a data migration, are restored afterwards).
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

EXAMPLE = PROJECT_DIR / "examples" / "agent.toml"
SUITE = "refund-agent-example"
INSPECT_LOG = PROJECT_DIR / "tests" / "fixtures" / "interop" / "inspect" / "agent-log.json"
CELLS = ("both_pass", "outcome_only", "path_only", "both_fail")
HOSTILE = "<script>alert('x')</script>"


def _apply(path) -> dict:
    out = StringIO()
    call_command("apply_config", str(path), "--json", stdout=out)
    return json.loads(out.getvalue())


def _example(tmp_path, base_url: str = "http://127.0.0.1:9/v1"):
    """The repository's example, its tool-loop target pointed at ``base_url``."""
    text = EXAMPLE.read_text(encoding="utf-8")
    assert 'base_url = "http://127.0.0.1:8000/v1"' in text
    path = tmp_path / "agent.toml"
    path.write_text(text.replace("http://127.0.0.1:8000/v1", base_url), encoding="utf-8")
    return path


def _run_suite(*args: str) -> Run:
    out = StringIO()
    try:
        call_command("run_suite", SUITE, *args, "--wait", "--json", stdout=out)
    except SystemExit as exit_:  # exit 1: some trial errored (the caps), still a finished run
        assert exit_.code == 1, out.getvalue()
    return Run.objects.get(uuid=json.loads(out.getvalue())["run"])


def _report(run: Run) -> dict:
    out = StringIO()
    call_command("run_report", str(run.uuid), "--json", stdout=out)
    return json.loads(out.getvalue())


def _two_by_two(report: dict) -> dict:
    agents = report["agents"]
    assert agents is not None, "no agent block"
    cells = {c: agents[c]["trials"] for c in CELLS}
    assert sum(cells.values()) == agents["in_table"]
    return cells


def _pages_show_it(client, run: Run, agents: dict) -> None:
    """The run page has the 2 × 2 with the JSON's counts; every trial page a trajectory."""
    html = client.get(f"/runs/{run.uuid}/").content.decode()
    assert 'id="agent-2x2"' in html
    table = html[
        html.index('id="agent-2x2"') : html.index("</table>", html.index('id="agent-2x2"'))
    ]
    counts = [int(n) for n in re.findall(r"<strong>(\d+)</strong>", table)]
    assert counts == [agents[c]["trials"] for c in CELLS]
    for trial in Trial.objects.filter(run=run, trajectory__isnull=False)[:3]:
        page = client.get(f"/trials/{trial.uuid}/").content.decode()
        assert 'id="trajectory"' in page and 'id="final-state"' in page
        _no_raw_markup(page)


def _no_raw_markup(html: str) -> None:
    assert "<script>alert" not in html
    assert "<img src=x" not in html


AGENT_GRADERS = [
    {"key": "outcome", "kind": "state", "config": {"mode": "subset"}},
    {
        "key": "path",
        "kind": "trajectory",
        "config": {"required": ["lookup_order"], "before": [["lookup_order", "issue_refund"]]},
    },
]


def test_a_callable_agent_from_config_as_code_is_graded_outcome_apart_from_path(
    tmp_path, client, alice
):
    applied = _apply(_example(tmp_path))
    assert applied["suites"][0]["cases"]["created"] == 3
    goals = dict(Case.objects.active().filter(suite__name=SUITE).values_list("key", "goal_state"))
    assert goals["large-order"]["escalations"] == [{"order_id": "A104"}]
    run = _run_suite(
        "--target-preset", "refund-bot", "--grader-set", "refund-agent", "--trials", "6"
    )
    assert run.status == Run.Status.SUCCEEDED
    report = _report(run)
    cells = _two_by_two(report)
    assert report["agents"]["in_table"] == 18
    assert report["agents"]["errored_trials"] == 0
    # the demo agent is seeded: on these cases it slips on the expected path 6 times in 18
    assert cells == {"both_pass": 12, "outcome_only": 0, "path_only": 6, "both_fail": 0}
    assert {g["kind"] for g in report["agents"]["groups"]} == {"wrong_outcome_expected_path"}
    outcome = report["agents"]["outcome"]
    # the verdict of an agent trial is its outcome (the path is non-gating)
    assert report["overall"]["trials_passed"] == outcome["trials_passed"]
    client.force_login(alice)
    _pages_show_it(client, run, report["agents"])
    # the case's goal state is on its page and in the API (part of its content hash)
    case = Case.objects.active().get(suite__name=SUITE, key="large-order")
    html = client.get(f"/runs/{run.uuid}/cases/{case.uuid}/").content.decode()
    assert 'id="case-goal-state"' in html and "escalated" in html
    served = client_for(alice).get(f"/api/cases/{case.uuid}/").json()
    assert served["goal_state"] == case.goal_state
    # applying the same file again changes nothing
    again = _apply(_example(tmp_path))
    actions = [e["action"] for e in again["suites"] + again["targets"] + again["grader_sets"]]
    assert set(actions) == {"unchanged"}


def _script_refund_agent(body: dict):
    """A tool-calling model for the example's cases: the order from the user's message, the
    turn from the tool results already in the conversation."""
    text = " ".join(m["content"] for m in body["messages"] if isinstance(m.get("content"), str))
    turn = sum(1 for m in body["messages"] if m.get("role") == "tool")
    if "A100" in text:  # the expected path: look up, refund in full, answer
        plan = [
            tool_calls_message(("lookup_order", {"order_id": "A100"}), content="Checking."),
            tool_calls_message(("issue_refund", {"order_id": "A100", "amount": 42.5})),
            f"Refunded $42.50. {HOSTILE}",
        ]
    elif "A104" in text:  # a tool that raises (a wrong order id) is a failed step; it goes on
        plan = [
            tool_calls_message(("lookup_order", {"order_id": "A104"})),
            tool_calls_message(("issue_refund", {"order_id": f"Z9{HOSTILE}", "amount": 1})),
            tool_calls_message(("escalate", {"order_id": "A104", "reason": "above $500"})),
            "A colleague will call you.",
        ]
    else:  # A103: a looping agent, stopped by the step cap (max_steps = 8)
        return tool_calls_message(("lookup_order", {"order_id": "A103"}))
    return plan[min(turn, len(plan) - 1)]


def test_a_tool_loop_agent_against_a_scripted_server_caps_and_failed_steps(tmp_path, client, alice):
    with FakeLLM(responder=_script_refund_agent) as llm:
        _apply(_example(tmp_path, llm.base_url))
        run = _run_suite(
            "--target-preset", "refund-loop", "--grader-set", "refund-agent", "--trials", "2"
        )
    assert run.status == Run.Status.FAILED  # two trials errored at the step cap
    trials = {
        (t.case.key, t.attempt): t for t in Trial.objects.filter(run=run).select_related("case")
    }
    looped = trials[("past-window", 1)]
    assert looped.status == Trial.Status.ERROR
    assert "step_cap" in looped.error_message and "max_steps 8" in looped.error_message
    assert len([s for s in looped.trajectory if s["kind"] == "tool_call"]) == 8
    assert not looped.grades.exists()  # an errored trial is never graded
    failed = trials[("large-order", 1)]
    assert failed.status == Trial.Status.OK
    errors = [s for s in failed.trajectory if s.get("status") == "error"]
    assert len(errors) == 1 and errors[0]["content"].startswith("KeyError: ")
    assert failed.final_state["order"]["status"] == "escalated"

    report = _report(run)
    agents = report["agents"]
    cells = _two_by_two(report)
    assert cells == {"both_pass": 4, "outcome_only": 0, "path_only": 0, "both_fail": 0}
    # the errored trials are neither a pass nor a fail: out of the table, counted
    assert agents["errored_trials"] == 2 and agents["left_out"] == 0
    assert agents["outcome"]["pipeline_errored"] == 2
    past = next(c for c in agents["cases"] if c["key"] == "past-window")
    assert past["errored"] == 2 and past["outcome_rate"] is None
    (cap,) = report["pipeline_error_reasons"]  # the cap's reason, grouped, on the report
    assert cap["count"] == 2 and "(max_steps 8)" in cap["reason"]

    client.force_login(alice)
    _pages_show_it(client, run, agents)
    run_page = client.get(f"/runs/{run.uuid}/").content.decode()
    assert "2 errored trials" in run_page
    capped = client.get(f"/trials/{looped.uuid}/").content.decode()
    assert 'id="trajectory"' in capped
    assert re.search(r'<p class="error pre">step_cap: step cap: the model still called', capped)
    assert "(8 tool calls, 1 failed)" in capped  # the call the cap stopped: not run
    page = client.get(f"/trials/{failed.uuid}/").content.decode()
    assert "KeyError" in page and "&lt;script&gt;alert" in page
    assert "(3 tool calls, 1 failed)" in page and "step-error" in page
    _no_raw_markup(page)
    lines = StringIO()
    call_command("run_report", str(run.uuid), stdout=lines)
    assert "2 errored trials" in lines.getvalue()

    # the comparison with the callable agent's run shows how outcome and path rates moved
    base = _run_suite(
        "--target-preset", "refund-bot", "--grader-set", "refund-agent", "--trials", "2"
    )
    compared = client.get(f"/runs/{run.uuid}/compare/{base.uuid}/").content.decode()
    assert 'id="agent-moves"' in compared and 'id="agent-case-moves"' in compared
    moves = compared[compared.index('id="agent-case-moves"') :]
    assert "past-window" in moves and "large-order" in moves


def test_a_tool_loop_agent_against_the_shared_mock(
    tmp_path,
    client,
    alice,
    mockllm,  # noqa: F811 - the fixture
):
    """With no agent script named (header, marker or ``--agent``), the shared mock answers a
    request that declares tools with text: each trial answers at once, the world unchanged
    (its scripted agents: tests/evals/test_tool_protocols.py).
    The case whose goal is "nothing happens" passes its outcome by a path that never looked
    the order up: a right outcome by a wrong path."""
    server = mockllm("--latency-ms", "0")
    _apply(_example(tmp_path, server.base_url))
    # The shared mock reports no cached tokens (no ``prompt_tokens_details``), so the built-in
    # gpt-4o-mini price, which has cached input, cannot price its calls and the loop's cost
    # cap could not be held (docs/costs.md). An override without a cached-input price can.
    ModelPrice.objects.create(
        model="gpt-4o-mini*", input_usd_per_mtok="0.15", output_usd_per_mtok="0.60"
    )
    run = _run_suite(
        "--target-preset", "refund-loop", "--grader-set", "refund-agent", "--trials", "2"
    )
    assert run.status == Run.Status.SUCCEEDED
    assert server.stats()["requests"] == 6
    report = _report(run)
    cells = _two_by_two(report)
    assert cells == {"both_pass": 0, "outcome_only": 2, "path_only": 0, "both_fail": 4}
    groups = report["agents"]["groups"]
    assert [g["label"] for g in groups] == [
        "right outcome via required tool `lookup_order` never called"
    ]
    client.force_login(alice)
    _pages_show_it(client, run, report["agents"])


def _grade_through_the_api(user, run: Run, graders=AGENT_GRADERS) -> dict:
    resp = client_for(user).post(f"/api/runs/{run.uuid}/grade", {"graders": graders}, format="json")
    assert resp.status_code == 200, resp.content
    return resp.json()


def test_an_imported_inspect_log_with_tool_calls_is_graded_by_state_and_trajectory(
    tmp_path, client, alice
):
    log = tmp_path / "agent-log.json"
    shutil.copy(INSPECT_LOG, log)
    out = StringIO()
    call_command(
        "import_results", str(log), "--suite", "inspect-agent", "--run", "r1", "--json", stdout=out
    )
    run = Run.objects.get(suite__name="inspect-agent", name="r1")
    graders = tmp_path / "graders.json"
    graders.write_text(json.dumps(AGENT_GRADERS))
    out = StringIO()
    call_command("grade_run", str(run.uuid), "--graders", str(graders), "--json", stdout=out)
    graded = json.loads(out.getvalue())
    assert graded["graders"] == ["outcome", "path"] and graded["trials"] == 3
    report = _report(run)
    cells = _two_by_two(report)
    # refund-A1/1: refunded after the lookup; refund-A1/2: refund refused (outcome fail);
    # refund-B7/1: state unchanged as the goal; refund-B7/2 errored at Inspect
    assert report["agents"]["in_table"] == 3
    assert report["agents"]["errored_trials"] == 1
    assert cells == {"both_pass": 2, "outcome_only": 0, "path_only": 0, "both_fail": 1}
    client.force_login(alice)
    _pages_show_it(client, run, report["agents"])


INGEST_STEPS = [
    {"kind": "message", "content": "Checking.", "input_tokens": 40, "cost_usd": 0.0001},
    {"kind": "tool_call", "name": "lookup_order", "arguments": {"order_id": "A1"}, "id": "c1"},
    {"kind": "tool_result", "id": "c1", "content": {"total": 30}, "latency_ms": 3.5},
    {"kind": "tool_call", "name": "issue_refund", "arguments": {"amount": 30}, "id": "c2"},
    {"kind": "tool_result", "id": "c2", "content": HOSTILE},
]
FORBIDDEN_PATH = [INGEST_STEPS[3], INGEST_STEPS[4], INGEST_STEPS[1], INGEST_STEPS[2]]


def test_an_ingested_agent_run_is_graded_through_the_api(tmp_path, client, alice):
    goal = {"orders": {"A1": {"refunded": 30}}}
    done = {"orders": {"A1": {"refunded": 30, "total": 30}}}
    undone = {"orders": {"A1": {"refunded": 0, "total": 30}}}

    def record(case, attempt, steps, final):
        return {
            "case_id": case,
            "input": f"refund {case}",
            "goal_state": goal,
            "attempt": attempt,
            "output": "done",
            "trajectory": steps,
            "final_state": final,
        }

    trials = [
        record("c1", 1, INGEST_STEPS, done),  # both pass
        record("c1", 2, FORBIDDEN_PATH, done),  # right outcome, wrong path
        record("c2", 1, INGEST_STEPS, undone),  # wrong outcome, expected path
        {
            **record("c2", 2, INGEST_STEPS[:2], None),
            "status": "error",
            "error_message": "step cap: 20",
        },
    ]
    resp = post_json(client_for(alice), {"suite": "ingested-agent", "run": "r1", "trials": trials})
    assert resp.status_code == 201, resp.content
    run = Run.objects.get(uuid=resp.json()["run"])
    graded = _grade_through_the_api(alice, run)
    assert graded["trials"] == 3 and graded["grades"] == 6
    report = _report(run)
    cells = _two_by_two(report)
    assert cells == {"both_pass": 1, "outcome_only": 1, "path_only": 1, "both_fail": 0}
    assert report["agents"]["errored_trials"] == 1
    kinds = {g["kind"]: g["label"] for g in report["agents"]["groups"]}
    assert kinds["right_outcome_wrong_path"] == (
        "right outcome via forbidden tool `issue_refund` before `lookup_order`"
    )
    assert kinds["wrong_outcome_expected_path"].startswith(
        "outcome fail on the expected path: different `orders.A1.refunded`"
    )
    client.force_login(alice)
    _pages_show_it(client, run, report["agents"])
    api = client_for(alice).get(f"/api/runs/{run.uuid}/").json()["report"]["agents"]
    assert api["errored_trials"] == 1 and api["outcome_only"] == report["agents"]["outcome_only"]
    # a run file carries it all: the copy reports the same agent block
    path = tmp_path / "run.json"
    call_command("export_run", str(run.uuid), "--out", str(path), stdout=StringIO())
    call_command("import_run", str(path), "--suite", "copy", "--name", "r1", stdout=StringIO())
    copy = _report(Run.objects.get(suite__name="copy", name="r1"))["agents"]
    for key in (*CELLS, "errored_trials", "left_out", "in_table"):
        assert copy[key] == report["agents"][key], key
    assert [g["label"] for g in copy["groups"]] == [g["label"] for g in report["agents"]["groups"]]
    trial = Trial.objects.get(run=run, case__key="c1", attempt=1)
    page = client.get(f"/trials/{trial.uuid}/").content.decode()
    assert "&lt;script&gt;alert" in page
    _no_raw_markup(page)


def test_docs_config_shows_the_agent_example_verbatim():
    doc = (PROJECT_DIR / "docs" / "config.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", doc, flags=re.S)
    assert EXAMPLE.read_text(encoding="utf-8") in blocks


def test_a_changed_goal_state_in_the_config_replaces_the_case_and_a_bad_one_is_refused(
    tmp_path,
):
    path = _example(tmp_path)
    _apply(path)
    old = Case.objects.active().get(suite__name=SUITE, key="past-window")
    text = path.read_text(encoding="utf-8").replace(
        'goal_state = { order = { id = "A103", status = "delivered" }',
        'goal_state = { order = { id = "A103", status = "refunded" }',
    )
    path.write_text(text, encoding="utf-8")
    assert _apply(path)["suites"][0]["cases"]["replaced"] == 1  # a new goal is a new case
    new = Case.objects.active().get(suite__name=SUITE, key="past-window")
    assert new.id != old.id and new.goal_state["order"]["status"] == "refunded"
    for bad, field in (
        ({"x": "a\u0000b"}, "suites.s.cases[0].goal_state"),
        ({"x": ["\ud800"]}, "suites.s.cases[0].goal_state"),
    ):
        document = {"suites": {"s": {"cases": [{"key": "k", "input": "i", "goal_state": bad}]}}}
        with pytest.raises(DomainError) as caught:
            config_apply(document=document)
        assert caught.value.field.startswith(field), caught.value.field
    assert not Case.objects.filter(suite__name="s").exists()
