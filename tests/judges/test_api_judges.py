"""The judges API (issue 6): judge versions with their trust state, judge runs, and grading a
run with a judge version. Per role: alice lead, bob reviewer, carol engineer, mallory
outsider, no token."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from evals.models import Grade, Run
from judges.models import JudgeRun
from labeling.approval import judge_trust_approve
from labeling.labels import label_submit
from tests.core.test_api_core import client_for
from tests.fakellm import FakeLLM
from tests.judge_builders import make_trials, make_version, verdict_json
from tests.labeling_builders import calibration_set, judged_run

UNKNOWN = "00000000-0000-0000-0000-000000000000"


@pytest.fixture
def trusted(db, alice, bob):
    """judged_run's 80 trials (judge fails 1..59); bob fails 1..60 and passes 61..80, so
    n = 80, agreement 79/80, FAR 1/60 (Wilson upper bound 8.9%), FRR 0/20; alice approves
    on the set."""
    run, version, trials = judged_run(80, judge_fails=59)
    cset = calibration_set(run, version, trials)
    for i, trial in enumerate(trials):
        label_submit(trial=trial, reviewer=bob, verdict="fail" if i < 60 else "pass")
    approval = judge_trust_approve(judge_version=version, by=alice, calibration_set=cset)
    return version, cset, approval


@pytest.fixture
def untrusted(db):
    _, version, _ = judged_run(
        2, judge_fails=1, suite_name="other", run_name="r9", judge_name="lenient"
    )
    return version


# --- judge versions -------------------------------------------------------------------------


def test_leads_and_engineers_read_judge_versions_and_reviewers_and_outsiders_do_not(
    trusted, alice, bob, carol, mallory
):
    version = trusted[0]
    for path in ("/api/judge-versions/", f"/api/judge-versions/{version.uuid}/"):
        for user, status in ((alice, 200), (carol, 200), (bob, 403), (mallory, 403), (None, 401)):
            assert client_for(user).get(path).status_code == status, (path, user)


def test_it_shows_the_active_approval_with_its_figures(trusted, carol):
    version, cset, approval = trusted
    row = client_for(carol).get(f"/api/judge-versions/{version.uuid}/").json()
    assert (row["judge"], row["kind"], row["number"], row["model"], row["protocol"]) == (
        "strict",
        "recorded",
        1,
        "judge-model",
        "p1",
    )
    assert row["content_hash"] == version.content_hash and len(row["content_hash"]) == 64
    assert row["trusted"] is True and row["trusted_at"].endswith("Z")
    got = row["approval"]
    assert (got["uuid"], got["approved_by"], got["calibration_set"], got["n"]) == (
        str(approval.uuid),
        "alice",
        str(cset.uuid),
        80,
    )
    assert Fraction(got["agreement"]).limit_denominator(100) == Fraction(79, 80)
    assert (got["far"]["numerator"], got["far"]["denominator"]) == (1, 60)
    assert got["far"]["rate"] == pytest.approx(1 / 60)
    assert got["far"]["ci_low"] < got["far"]["rate"] < got["far"]["ci_high"]
    assert (got["frr"]["numerator"], got["frr"]["denominator"], got["frr"]["rate"]) == (0, 20, 0.0)
    assert got["kappa"]["kappa"] == pytest.approx(approval.figures["kappa"]["kappa"])
    assert got["kappa"]["se"] > 0 and got["kappa"]["reason"] == ""
    assert "prompt_template" in row and "output_schema" in row


def test_it_filters_by_judge_and_strictly_by_trusted(trusted, untrusted, carol):
    client = client_for(carol)

    def judges(query: str) -> list[tuple[str, bool]]:
        rows = client.get(f"/api/judge-versions/{query}").json()["results"]
        return sorted((r["judge"], r["trusted"]) for r in rows)

    assert judges("") == [("lenient", False), ("strict", True)]
    assert judges("?trusted=true") == [("strict", True)]
    assert judges("?trusted=false") == [("lenient", False)]
    assert judges("?judge=lenient") == [("lenient", False)]
    assert judges("?judge=nobody") == []
    row = client.get("/api/judge-versions/?trusted=false").json()["results"][0]
    assert row["approval"] is None and "prompt_template" not in row
    for bad in ("True", "1", "yes", "", "false "):
        response = client.get("/api/judge-versions/", {"trusted": bad})
        assert response.status_code == 400, bad
        assert list(response.json()) == ["trusted"]


def test_an_unknown_judge_version_is_a_404(carol):
    assert client_for(carol).get(f"/api/judge-versions/{UNKNOWN}/").status_code == 404
    assert client_for(carol).get("/api/judge-versions/not-a-uuid/").status_code == 404


# --- judge runs -------------------------------------------------------------------------------


def _start(user, body, **kwargs):
    return client_for(user).post("/api/judge-runs", body, format="json", **kwargs)


def test_an_engineer_grades_a_run_with_a_judge_version_and_polls_its_progress(
    carol, django_capture_on_commit_callbacks
):
    with FakeLLM(responder=lambda body: verdict_json("PASS")) as llm:
        trials = make_trials(["Paris", "Paris", "Lyon"])
        version = make_version(llm)
        run = trials[0].run
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            response = _start(
                carol,
                {"run": str(run.uuid), "judge_version": str(version.uuid), "sample": 2, "seed": 7},
            )
        assert len(callbacks) == 1 and llm.requests == 2
    assert response.status_code == 202
    body = response.json()
    judge_run = JudgeRun.objects.get()
    assert (
        body["uuid"],
        body["run"],
        body["judge_version"],
        body["status"],
        body["trials_total"],
        body["started_by"],
    ) == (str(judge_run.uuid), str(run.uuid), str(version.uuid), "queued", 2, "carol")
    assert response["Location"] == f"/api/judge-runs/{judge_run.uuid}/"
    progress = client_for(carol).get(response["Location"]).json()
    assert (
        progress["status"],
        progress["trials_graded"],
        progress["trials_errored"],
        progress["progress"],
    ) == ("succeeded", 2, 0, 1.0)
    assert Grade.objects.filter(judge_version=version).count() == 2
    rows = client_for(carol).get(f"/api/judge-runs/?run={run.uuid}").json()["results"]
    assert [r["uuid"] for r in rows] == [str(judge_run.uuid)]


def test_only_engineers_and_leads_start_or_read_judge_runs(
    alice, bob, carol, mallory, django_capture_on_commit_callbacks
):
    trials = make_trials(["Paris"])
    version = make_version(type("LLM", (), {"base_url": "http://127.0.0.1:9/v1"}))
    body = {"run": str(trials[0].run.uuid), "judge_version": str(version.uuid)}
    for user, status in ((bob, 403), (mallory, 403), (None, 401)):
        assert _start(user, body).status_code == status
    with django_capture_on_commit_callbacks(execute=False):
        assert _start(alice, body).status_code == 202
    uuid = JudgeRun.objects.get().uuid
    for path in ("/api/judge-runs/", f"/api/judge-runs/{uuid}/"):
        for user, status in ((alice, 200), (carol, 200), (bob, 403), (mallory, 403), (None, 401)):
            assert client_for(user).get(path).status_code == status


def test_it_names_the_field_of_a_bad_judge_run_and_writes_nothing(carol, untrusted):
    trials = make_trials(["Paris"])
    version = make_version(type("LLM", (), {"base_url": "http://127.0.0.1:9/v1"}))
    run, good = str(trials[0].run.uuid), str(version.uuid)
    cases = [
        ({"run": run}, "judge_version"),
        ({"run": 5, "judge_version": good}, "run"),
        ({"run": "R1", "judge_version": good}, "run"),
        ({"run": run, "judge_version": good, "sample": "2"}, "sample"),
        ({"run": run, "judge_version": good, "sample": True}, "sample"),
        ({"run": run, "judge_version": good, "sample": 1.0}, "sample"),
        ({"run": run, "judge_version": good, "sample": 0}, "sample"),
        ({"run": run, "judge_version": good, "seed": "7"}, "seed"),
        ({"run": run, "judge_version": good, "smaple": 2}, "smaple"),
        ({"run": run, "judge_version": str(untrusted.uuid)}, "judge_version"),
    ]
    for body, field in cases:
        response = _start(carol, body)
        assert response.status_code == 400, body
        assert field in response.json(), (body, response.json())
    Run.objects.filter(uuid=run).update(status=Run.Status.RUNNING)
    response = _start(carol, {"run": run, "judge_version": good})
    assert response.status_code == 400 and "run" in response.json()
    assert JudgeRun.objects.count() == 0


def test_unknown_ids_are_404_and_a_form_body_is_refused(carol):
    trials = make_trials(["Paris"])
    version = make_version(type("LLM", (), {"base_url": "http://127.0.0.1:9/v1"}))
    run = str(trials[0].run.uuid)
    assert _start(carol, {"run": UNKNOWN, "judge_version": str(version.uuid)}).status_code == 404
    assert _start(carol, {"run": run, "judge_version": UNKNOWN}).status_code == 404
    assert client_for(carol).get(f"/api/judge-runs/{UNKNOWN}/").status_code == 404
    response = client_for(carol).post(
        "/api/judge-runs", {"run": run, "judge_version": str(version.uuid)}
    )
    assert response.status_code == 415
    response = client_for(carol).post("/api/judge-runs", "[1, 2]", content_type="application/json")
    assert response.status_code == 400
    assert JudgeRun.objects.count() == 0


def test_the_list_filters_refuse_a_value_that_is_not_a_uuid(carol):
    response = client_for(carol).get("/api/judge-runs/?judge_version=v1")
    assert response.status_code == 400 and list(response.json()) == ["judge_version"]


def test_judge_version_responses_are_strict_json(trusted, carol):
    body = client_for(carol).get("/api/judge-versions/").content.decode()
    assert json.loads(body, parse_constant=pytest.fail)["results"]
