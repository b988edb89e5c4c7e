"""The experiments API (evals.api.experiments): start, list, read, settle; engineers and leads
only; strict JSON with errors on the field; presets by name."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evals.experiments.start import experiment_start
from evals.models import Case, Experiment, ExperimentVariant, GraderSetPreset, Suite, TargetPreset
from tests.core.test_api_core import client_for

pytestmark = pytest.mark.django_db

GRADERS = [{"key": "exact", "kind": "exact"}]


def _suite(n: int = 4, name: str = "support") -> Suite:
    suite = Suite.objects.create(name=name)
    for i in range(n):
        Case.objects.create(suite=suite, key=f"c{i}", input=f"question {i}", expected="yes")
    return suite


def _simulated(p: float) -> dict:
    return {"kind": "simulated", "model": "simulated", "default_pass_probability": p}


def _body(suite: Suite, **extra) -> dict:
    return {
        "suite": str(suite.uuid),
        "name": "prompts",
        "variants": [
            {"label": "good", "target": _simulated(0.95)},
            {"label": "bad", "target": _simulated(0.05)},
        ],
        "graders": GRADERS,
        "trials_per_case": 2,
        "seed": 7,
        **extra,
    }


def _queued(suite: Suite, capture, name: str = "prompts") -> Experiment:
    """An experiment whose runs no worker has taken (its messages never sent)."""
    with capture(execute=False):
        return experiment_start(
            suite=suite,
            name=name,
            variants=[
                {"label": "good", "target": _simulated(0.95)},
                {"label": "bad", "target": _simulated(0.05)},
            ],
            graders=GRADERS,
            trials_per_case=2,
            seed=3,
        )


def test_an_engineer_starts_an_experiment_and_lists_it(carol):
    suite = _suite()
    response = client_for(carol).post("/api/experiments", _body(suite), format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    experiment = Experiment.objects.get(uuid=data["uuid"])
    assert experiment.started_by == carol and experiment.seed == 7
    assert [v["label"] for v in data["variants"]] == ["good", "bad"]
    runs = {
        v.label: str(v.run.uuid) for v in ExperimentVariant.objects.filter(experiment=experiment)
    }
    assert {v["label"]: v["run"] for v in data["variants"]} == runs
    assert data["variants"][0]["progress"]["planned"] == 8
    listed = client_for(carol).get("/api/experiments", {"suite": str(suite.uuid)}).json()
    assert [e["uuid"] for e in listed["results"]] == [data["uuid"]]
    assert listed["results"][0]["decision"] is None  # the list never computes decisions
    other = _suite(1, name="other")
    empty = client_for(carol).get("/api/experiments", {"suite": str(other.uuid)}).json()
    assert empty["results"] == []
    unknown = client_for(carol).get("/api/experiments", {"suite": str(uuid.uuid4())})
    assert unknown.status_code == 404 and unknown.json()["field"] == "suite"


def test_the_detail_waits_while_a_variant_runs(alice, django_capture_on_commit_callbacks):
    experiment = _queued(_suite(), django_capture_on_commit_callbacks)
    data = client_for(alice).get(f"/api/experiments/{experiment.uuid}").json()
    assert data["ready"] is False and data["decision"] is None and data["racing"] is None
    assert [v["status"] for v in data["variants"]] == ["queued", "queued"]
    assert data["variants"][1]["progress"] == {
        "finished": 0,
        "planned": 8,
        "errored": 0,
        "cancelled": 0,
    }
    assert client_for(alice).get(f"/api/experiments/{uuid.uuid4()}").status_code == 404
    assert client_for(alice).get("/api/experiments/not-a-uuid").status_code == 404


@pytest.mark.parametrize("who", ["bob", "mallory", None])
def test_reviewers_outsiders_and_anonymous_are_refused_everywhere(
    who, request, django_capture_on_commit_callbacks
):
    user = request.getfixturevalue(who) if who else None
    suite = _suite()
    experiment = _queued(suite, django_capture_on_commit_callbacks)
    client = client_for(user)
    expected = (403,) if user else (401, 403)
    assert client.get("/api/experiments").status_code in expected
    assert client.get(f"/api/experiments/{experiment.uuid}").status_code in expected
    started = client.post("/api/experiments", _body(suite, name="again"), format="json")
    assert started.status_code in expected
    settle = client.post(f"/api/experiments/{experiment.uuid}/settle", {}, format="json")
    assert settle.status_code in expected
    assert Experiment.objects.count() == 1
    assert experiment.racing == {} and not Experiment.objects.exclude(racing={}).exists()


@pytest.mark.parametrize("who", ["alice", "carol"])
def test_leads_and_engineers_may_use_every_endpoint(
    who, request, django_capture_on_commit_callbacks
):
    user = request.getfixturevalue(who)
    suite = _suite()
    experiment = _queued(suite, django_capture_on_commit_callbacks)
    client = client_for(user)
    assert client.get("/api/experiments").status_code == 200
    assert client.get(f"/api/experiments/{experiment.uuid}").status_code == 200
    with django_capture_on_commit_callbacks(execute=False):
        assert (
            client.post("/api/experiments", _body(suite, name="b"), format="json").status_code
            == 201
        )
    # Allowed, refused only because its runs have not finished.
    settle = client.post(f"/api/experiments/{experiment.uuid}/settle", {}, format="json")
    assert settle.status_code == 409 and settle.json()["field"] == "rounds"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("trials_per_case", "2"),
        ("trials_per_case", 2.0),
        ("trials_per_case", True),
        ("alpha", "0.05"),
        ("alpha", False),
        ("seed", "7"),
        ("seed", -1),
        ("k", "1"),
        ("metric", "PASS_RATE"),
        ("name", 5),
        ("suite", 5),
        ("grader_set", False),
        ("source_version", 1),
    ],
)
def test_strict_json_no_coercion_the_field_named(carol, field, value):
    body = {**_body(_suite()), field: value}
    response = client_for(carol).post("/api/experiments", body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()
    assert not Experiment.objects.exists()


def test_an_unknown_field_is_refused(carol):
    response = client_for(carol).post(
        "/api/experiments", _body(_suite(), racing=True), format="json"
    )
    assert response.status_code == 400 and "racing" in response.json()


@pytest.mark.parametrize(
    ("variants", "field"),
    [
        (
            [
                {"label": "a", "target": _simulated(0.5)},
                {
                    "label": "b",
                    "target": {
                        "kind": "openai",
                        "base_url": "http://127.0.0.1:9/v1",
                        "prompt_template": "$input",
                        "api_key_env": None,
                    },
                },
            ],
            "variants[1].target.model",
        ),
        ([{"label": "a", "target": _simulated(0.5)}], "variants"),
        (
            [{"label": "a", "target": _simulated(0.5)}, {"label": "A", "target": _simulated(0.1)}],
            "variants[1].label",
        ),
        (
            [{"label": "a", "target": _simulated(0.5)}, {"label": "b", "preset": "nope"}],
            "variants[1].preset",
        ),
        (
            [
                {"label": "a", "target": _simulated(0.5)},
                {"label": "b", "preset": "p", "target": _simulated(0.5)},
            ],
            "variants[1].preset",
        ),
        (
            [{"label": "a", "target": _simulated(0.5)}, {"label": "b", "target": "simulated"}],
            "variants[1].target",
        ),
        ("two", "variants"),
    ],
)
def test_a_variant_error_names_the_variant_and_nothing_starts(carol, variants, field):
    response = client_for(carol).post(
        "/api/experiments", _body(_suite(), variants=variants), format="json"
    )
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == field
    assert not Experiment.objects.exists()


def test_graders_or_a_grader_set_exactly_one(carol):
    suite = _suite()
    both = client_for(carol).post(
        "/api/experiments", _body(suite, grader_set="mine"), format="json"
    )
    assert both.status_code == 400 and both.json()["field"] == "grader_set"
    body = _body(suite)
    del body["graders"]
    neither = client_for(carol).post("/api/experiments", body, format="json")
    assert neither.status_code == 400 and neither.json()["field"] == "graders"
    unknown = client_for(carol).post(
        "/api/experiments", {**body, "grader_set": "mine"}, format="json"
    )
    assert unknown.status_code == 400 and unknown.json()["field"] == "grader_set"
    bad_grader = client_for(carol).post(
        "/api/experiments",
        _body(suite, graders=[{"key": "r", "kind": "regex", "config": {"pattern": "("}}]),
        format="json",
    )
    assert bad_grader.status_code == 400
    assert bad_grader.json()["field"].startswith("graders[0].config")


def test_presets_by_name_are_copied_into_the_runs(carol):
    suite = _suite()
    TargetPreset.objects.create(name="prod", config=_simulated(0.9))
    GraderSetPreset.objects.create(name="strict", graders=GRADERS)
    body = _body(
        suite,
        variants=[{"label": "prod", "preset": "prod"}, {"label": "new", "target": _simulated(0.2)}],
        grader_set="strict",
    )
    del body["graders"]
    response = client_for(carol).post("/api/experiments", body, format="json")
    assert response.status_code == 201, response.json()
    variant = ExperimentVariant.objects.select_related("run").get(label="prod")
    assert variant.run.target["default_pass_probability"] == 0.9
    assert variant.run.target["seed"] == 7  # the shared seed, written where none was
    assert [g["key"] for g in variant.run.graders] == ["exact"]


def test_a_taken_name_is_a_conflict_and_an_unknown_suite_not_found(carol):
    suite = _suite()
    assert (
        client_for(carol).post("/api/experiments", _body(suite), format="json").status_code == 201
    )
    again = client_for(carol).post("/api/experiments", _body(suite), format="json")
    assert again.status_code == 409 and again.json()["field"] == "name"
    missing = {**_body(suite), "suite": str(uuid.uuid4()), "name": "x"}
    response = client_for(carol).post("/api/experiments", missing, format="json")
    assert response.status_code == 404 and response.json()["field"] == "suite"
    assert Experiment.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"rounds": 0}, "rounds"),
        ({"rounds": 6}, "rounds"),
        ({"rounds": "2"}, "rounds"),
        ({"trials_per_round": 21}, "trials_per_round"),
        ({"trials_per_round": 1.5}, "trials_per_round"),
        ({"tpr": 1}, "tpr"),
    ],
)
def test_settle_bounds_are_checked_on_their_field(
    carol, body, field, django_capture_on_commit_callbacks
):
    experiment = _queued(_suite(), django_capture_on_commit_callbacks)
    response = client_for(carol).post(
        f"/api/experiments/{experiment.uuid}/settle", body, format="json"
    )
    assert response.status_code == 400 and field in response.json()
    experiment.refresh_from_db()
    assert experiment.racing == {}


def test_the_list_reads_a_page_in_queries_that_do_not_grow_with_it(
    carol, django_capture_on_commit_callbacks
):
    suite = _suite()
    client = client_for(carol)
    _queued(suite, django_capture_on_commit_callbacks, name="first")
    client.get("/api/experiments")  # the token's first use writes its last_used_at
    with CaptureQueriesContext(connection) as one:
        assert len(client.get("/api/experiments").json()["results"]) == 1
    for i in range(4):
        _queued(suite, django_capture_on_commit_callbacks, name=f"more-{i}")
    with CaptureQueriesContext(connection) as five:
        assert len(client.get("/api/experiments").json()["results"]) == 5
    assert len(five.captured_queries) == len(one.captured_queries)


def test_a_finished_experiment_reads_with_its_decision(carol, django_capture_on_commit_callbacks):
    suite = _suite(6)
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(carol).post("/api/experiments", _body(suite), format="json")
    assert response.status_code == 201
    data = client_for(carol).get(f"/api/experiments/{response.json()['uuid']}").json()
    assert data["ready"] is True
    assert [v["status"] for v in data["variants"]] == ["succeeded", "succeeded"]
    decision = data["decision"]
    assert "good" in decision["best"] and decision["sentence"]
    assert 0 < decision["level"] <= decision["alpha"] == 0.05
    assert decision["cases"] == 6 and decision["method"]
    good, bad = decision["variants"]
    assert (good["label"], good["graded"], good["in_set"]) == ("good", 12, True)
    assert 0 <= good["low"] <= good["estimate"] <= good["high"] <= 1
    assert good["cost_usd"] is None and good["cost_per_pass"] is None  # simulated: no price
    assert bad["passed"] < good["passed"]
    assert not bad["in_set"] and bad["beaten_by"] == "good" and bad["out_reason"]
    assert decision["decided"] is True and decision["best"] == ["good"]
