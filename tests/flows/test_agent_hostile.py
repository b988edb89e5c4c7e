"""Hostile text through every agent path (a tool name, arguments and a result with markup,
U+0000, lone surrogates, a 1 MB result): what a pipeline returns is cleaned (U+FFFD, counted),
what comes from outside (ingest, an Inspect log) is refused naming the field; the trial page,
the run page's disagreement groups and reasons, ``run_report --json`` and the review queue
made from a hostile group show it escaped, never as markup."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from core.errors import DomainError
from core.text import REPLACED_KEY, contains_unstorable
from evals.models import Case, Grade, Run, Suite, Trial
from evals.runner.start import run_start
from interop.run_file import run_export, run_import
from labeling.models import CalibrationSet
from tests.fakellm import FakeLLM, tool_calls_message
from tests.flows.agent_hostile_tools import BIG, IMG_KEY, SCRIPT_TOOL
from tests.import_helpers import import_bytes
from tests.interop.test_api_ingest import client_for, post_json
from tests.interop.test_import_inspect import _bytes, _import
from tests.interop.test_import_inspect_agent import AGENT_LOG

pytestmark = pytest.mark.django_db

H = "tests.flows.agent_hostile_tools"
GRADERS = [
    {"key": "outcome", "kind": "state", "config": {"mode": "exact"}},
    {"key": "path", "kind": "trajectory", "config": {"order": ["lookup_order", "issue_refund"]}},
]
RAW = ("<script>alert", "<img src=x", "<b>")


def _escaped(html: str) -> None:
    for raw in RAW:
        assert raw not in html, raw


def _suite(name: str, *keys: str) -> Suite:
    suite = Suite.objects.create(name=name)
    for key in keys:
        Case.objects.create(suite=suite, key=key, input=f"do {key}", goal_state={"done": True})
    return suite


def _start(suite: Suite, target: dict, capture) -> Run:
    with capture(execute=True):
        run = run_start(suite=suite, name="hostile", target=target, graders=GRADERS,
                        trials_per_case=1)  # fmt: skip
    run.refresh_from_db()
    return run


def _report(run: Run) -> dict:
    out = StringIO()
    call_command("run_report", str(run.uuid), "--json", stdout=out)
    return json.loads(out.getvalue())


def test_a_hostile_callable_agent_is_cleaned_graded_and_escaped_everywhere(
    django_capture_on_commit_callbacks, client, alice
):
    suite = _suite("hostile-callable", "right", "wrong")
    run = _start(suite, {"kind": "callable", "path": f"{H}:hostile_agent"},
                 django_capture_on_commit_callbacks)  # fmt: skip
    assert run.status == Run.Status.SUCCEEDED
    trials = {t.case.key: t for t in Trial.objects.filter(run=run).select_related("case")}
    right, wrong = trials["right"], trials["wrong"]
    for trial in (right, wrong):
        assert trial.status == Trial.Status.OK
        assert not contains_unstorable(trial.trajectory)
        assert trial.trajectory[1]["name"] == SCRIPT_TOOL  # markup is data, stored as is
        assert trial.trajectory[1]["arguments"]["q"] == "<b>\ufffd\ufffd</b>"
        assert len(trial.trajectory[2]["content"]) == len(BIG)  # 1 MB stored whole
        assert trial.raw_response[REPLACED_KEY]["trajectory"] == 4
    assert wrong.final_state == {"done": True, IMG_KEY: "\ufffd"}
    assert wrong.raw_response[REPLACED_KEY]["final_state"] == 1

    report = _report(run)
    agents = report["agents"]
    assert (agents["outcome_only"]["trials"], agents["path_only"]["trials"]) == (1, 1)
    labels = {g["kind"]: g["label"] for g in agents["groups"]}
    assert IMG_KEY in labels["wrong_outcome_expected_path"]  # an untrusted key, as data
    reasons = " ".join(t["reason"] for g in agents["groups"] for t in g["trials"])
    assert SCRIPT_TOOL in reasons

    client.force_login(alice)
    run_page = client.get(f"/runs/{run.uuid}/").content.decode()
    _escaped(run_page)
    assert "&lt;img src=x onerror=alert(&#x27;key&#x27;)&gt;" in run_page
    assert "&lt;script&gt;alert(&#x27;tool&#x27;)&lt;/script&gt;" in run_page
    for trial in (right, wrong):
        page = client.get(f"/trials/{trial.uuid}/").content.decode()
        _escaped(page)
        assert "&lt;script&gt;alert(&#x27;big&#x27;)" in page
        assert len(page) < 400_000  # the 1 MB result is folded and cut on the page
    # the hostile group goes to review with one click, and its queue page escapes it
    resp = client.post(
        f"/runs/{run.uuid}/disagreements/review/",
        {"kind": "wrong_outcome_expected_path", "label": labels["wrong_outcome_expected_path"]},
    )
    assert resp.status_code == 302, resp.content
    cset = CalibrationSet.objects.get(run=run)
    assert cset.size == 1 and cset.design["group"] == labels["wrong_outcome_expected_path"]
    _escaped(client.get(resp["Location"]).content.decode())
    # a posted label holding U+0000 is refused (a form post: the boundary rule), and one
    # holding markup that names no group goes back to the run page with the message escaped
    resp = client.post(
        f"/runs/{run.uuid}/disagreements/review/",
        {"kind": "wrong_outcome_expected_path", "label": "x\u0000<script>alert(1)</script>"},
    )
    assert resp.status_code == 400
    resp = client.post(
        f"/runs/{run.uuid}/disagreements/review/",
        {"kind": "wrong_outcome_expected_path", "label": "<script>alert(1)</script>"},
        follow=True,
    )
    assert resp.status_code == 200
    html = resp.content.decode()
    assert "has no disagreement in group" in html
    _escaped(html)
    assert CalibrationSet.objects.filter(run=run).count() == 1


def _tool_turns(body: dict) -> int:
    return sum(1 for m in body["messages"] if m.get("role") == "tool")


def test_a_hostile_model_and_tool_in_the_tool_loop_are_cleaned_and_escaped(
    django_capture_on_commit_callbacks, client, alice
):
    turns = [
        tool_calls_message((SCRIPT_TOOL, '{"q": "\\u0000\\ud800<b>x</b>"}')),
        tool_calls_message(("huge", {})),
        tool_calls_message(("finish", {})),
        "done \u0000 <script>alert('answer')</script>",
    ]
    suite = _suite("hostile-loop", "right")
    with FakeLLM(responder=lambda body: turns[min(_tool_turns(body), 3)]) as llm:
        target = {
            "kind": "openai",
            "base_url": llm.base_url,
            "model": "example-model-1.5",
            "prompt_template": "$input",
            "tools": [f"{H}:huge", f"{H}:finish"],
            "environment": f"{H}:environment",
            "max_attempts": 1,
        }
        run = _start(suite, target, django_capture_on_commit_callbacks)
        sent = llm.bodies
    # the model is sent what is stored: a lone surrogate cannot go in a UTF-8 body
    assert sent[2]["messages"][-1]["content"].startswith("<script>alert('big')</script>\ufffd")
    trial = Trial.objects.get(run=run)
    assert trial.status == Trial.Status.OK, trial.error_message
    assert not contains_unstorable(trial.trajectory)
    assert trial.output == "done \ufffd <script>alert('answer')</script>"
    unknown = trial.trajectory[1]
    assert unknown["status"] == "error" and unknown["content"].startswith("no tool named")
    assert trial.trajectory[0]["name"] == SCRIPT_TOOL
    big = trial.trajectory[3]
    assert big["status"] == "ok" and len(big["content"]) == len(BIG) + 1
    assert trial.final_state == {"done": True}
    agents = _report(run)["agents"]
    assert agents["outcome_only"]["trials"] == 1  # the goal, by a path without the lookup
    client.force_login(alice)
    page = client.get(f"/trials/{trial.uuid}/").content.decode()
    _escaped(page)
    assert "&lt;script&gt;alert(&#x27;tool&#x27;)" in page
    _escaped(client.get(f"/runs/{run.uuid}/").content.decode())


@pytest.mark.parametrize(
    ("step", "field"),
    [
        ({"kind": "tool_call", "name": "a\u0000", "arguments": {}}, "trajectory[1].name"),
        ({"kind": "tool_call", "name": "a", "arguments": {"\ud800": 1}}, "trajectory[1].arguments"),
        ({"kind": "tool_result", "content": {"x": ["\udfff"]}}, "trajectory[1].content.x[0]"),
    ],
)
def test_ingest_refuses_unstorable_agent_text_naming_the_step(alice, step, field):
    steps = [{"kind": "message", "content": "hi"}, step]
    record = {"case_id": "c1", "input": "x", "output": "o", "trajectory": steps}
    resp = post_json(client_for(alice), {"suite": "s", "run": "r", "trials": [record]})
    assert resp.status_code == 400, resp.content
    assert resp.json()["field"].startswith(field), resp.json()
    assert not Run.objects.exists()


def test_ingest_stores_markup_and_a_1mb_result_as_data_and_pages_escape_them(client, alice):
    steps = [
        {"kind": "tool_call", "name": SCRIPT_TOOL, "arguments": {"q": "<b>x</b>"}, "id": "c1"},
        {"kind": "tool_result", "id": "c1", "content": BIG.replace("\u0000", "")},
    ]
    record = {
        "case_id": "c1",
        "input": "x",
        "goal_state": {"done": True},
        "output": "o",
        "trajectory": steps,
        "final_state": {"done": True, IMG_KEY: 1},
    }
    resp = post_json(client_for(alice), {"suite": "s", "run": "r", "trials": [record]})
    assert resp.status_code == 201, resp.content
    run = Run.objects.get(uuid=resp.json()["run"])
    graded = client_for(alice).post(f"/api/runs/{run.uuid}/grade", {"graders": GRADERS},
                                    format="json")  # fmt: skip
    assert graded.status_code == 200, graded.content
    reasons = dict(Grade.objects.filter(trial__run=run).values_list("grader", "reason"))
    assert IMG_KEY in reasons["outcome"] and SCRIPT_TOOL in reasons["path"]
    trial = Trial.objects.get(run=run)
    client.force_login(alice)
    for url in (f"/trials/{trial.uuid}/", f"/runs/{run.uuid}/"):
        _escaped(client.get(url).content.decode())


def test_an_inspect_log_with_unstorable_tool_text_is_refused_naming_the_message():
    doc = json.loads(AGENT_LOG.read_bytes())
    sample = doc["samples"][0]
    index = next(i for i, m in enumerate(sample["messages"]) if m["role"] == "tool")
    sample["messages"][index]["content"] = "ok \u0000"
    with pytest.raises(DomainError) as caught:
        _import(_bytes(doc), name="agent-log.json")
    assert caught.value.field.startswith(f"samples[0].messages[{index}]"), caught.value.field
    assert not Trial.objects.exists()


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"trajectory": [{"kind": "tool_call", "name": "x\u0000", "arguments": {}}]}, "trajectory"),
        ({"trajectory": [{"kind": "tool_result", "content": "\ud800"}]}, "trajectory"),
        ({"final_state": {"k": "\u0000"}}, "final_state"),
        ({"goal_state": {"\udfff": 1}}, "goal_state"),
    ],
)
def test_a_results_file_with_unstorable_agent_text_is_refused_naming_the_field(record, field):
    line = {"case_id": "c1", "input": "x", "output": "o", **record}
    with pytest.raises(DomainError) as caught:
        import_bytes(json.dumps(line).encode(), filename="records.jsonl")
    assert field in (caught.value.field or ""), caught.value
    assert not Trial.objects.exists()


def test_a_run_file_with_unstorable_agent_text_is_refused_naming_the_path(alice):
    record = {"case_id": "c1", "input": "x", "output": "o", "trajectory": [{"kind": "message",
              "content": "hi"}], "final_state": {"k": 1}}  # fmt: skip
    resp = post_json(client_for(alice), {"suite": "s", "run": "r", "trials": [record]})
    assert resp.status_code == 201, resp.content
    data = json.loads(json.dumps(run_export(run=Run.objects.get())))
    data["cases"][0]["trials"][0]["final_state"] = {"k": "\u0000"}
    with pytest.raises(DomainError) as caught:
        run_import(data=data, suite_name="copy")
    assert caught.value.field.startswith("cases[0].trials[0].final_state"), caught.value.field
    data["cases"][0]["trials"][0]["final_state"] = {"k": 1}
    data["cases"][0]["trials"][0]["trajectory"][0]["content"] = "\ud800"
    with pytest.raises(DomainError) as caught:
        run_import(data=data, suite_name="copy")
    assert caught.value.field.startswith("cases[0].trials[0].trajectory[0]"), caught.value.field
    assert not Suite.objects.filter(name="copy").exists()


def test_a_reviewer_of_a_disagreement_queue_sees_the_trajectory_and_states_escaped(
    django_capture_on_commit_callbacks, client, alice, bob
):
    suite = _suite("hostile-review", "right", "wrong")
    run = _start(suite, {"kind": "callable", "path": f"{H}:hostile_agent"},
                 django_capture_on_commit_callbacks)  # fmt: skip
    client.force_login(alice)
    resp = client.post(f"/runs/{run.uuid}/disagreements/review/")
    assert resp.status_code == 302
    cset = CalibrationSet.objects.get(run=run)
    assert cset.size == 2
    client.force_login(bob)
    html = client.get(f"/calibration-sets/{cset.uuid}/label/").content.decode()
    assert 'id="trajectory"' in html and 'id="queue-goal-state"' in html
    assert "&lt;script&gt;alert(&#x27;tool&#x27;)&lt;/script&gt;" in html  # the tool's name
    assert "(2 tool calls, 0 failed)" in html
    _escaped(html)
    # blind: the trajectory holds no verdict, and the grades' reasons are not on the page
    reasons = Grade.objects.filter(trial__run=run, passed=False).values_list("reason", flat=True)
    for reason in reasons:
        assert reason[:40] not in html
