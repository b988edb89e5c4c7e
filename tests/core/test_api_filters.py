"""List filters of the API, in the database on SQLite and PostgreSQL: ``?tag=`` (whole tag,
exact), ``?case=``, ``?suite=``, ``?run=``, ``?status=`` (unknown values are a 400)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from evals.models import Case, Grade, Run, Trial
from evals.tags import cases_tagged, has_tag, trials_tagged
from tests.core.test_api_core import client_for
from tests.report_builders import ERR, add_trial, make_run

pytestmark = pytest.mark.django_db

GRADERS = [{"key": "exact", "kind": "exact_match", "config": {}, "gating": True}]
ODD = 'it\'s "50%_off"'  # a quote, a double quote, a percent sign and an underscore
TAGS = {"a": ["reg"], "b": ["regression"], "c": [ODD, "x"], "d": ["50%"], "e": ["it_s"], "f": []}


@pytest.fixture
def run() -> Run:
    r = make_run(cases=list(TAGS.items()), graders=GRADERS, n=1)
    for key in TAGS:
        add_trial(r, key, 1, grades={"exact": key != "b"})
    add_trial(r, "a", 2, status="error", error="HTTP 500")
    add_trial(r, "c", 2, grades={"exact": ERR})
    return r


@pytest.fixture
def other_run() -> Run:
    r = make_run(cases=[("z", ["reg"])], graders=GRADERS, suite="T", name="R9")
    add_trial(r, "z", 1, grades={"exact": True})
    return r


def keys(rows) -> list[str]:
    return sorted(rows)


def listed(user, path: str, params: dict) -> list[dict]:
    response = client_for(user).get(f"/api/{path}/", params)
    assert response.status_code == 200, response.content
    return response.json()["results"]


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("reg", ["a"]),
        ("regression", ["b"]),
        ("re", []),
        ("reg%", []),
        ("re_", []),
        (ODD, ["c"]),
        ("50%", ["d"]),
        ("it_s", ["e"]),
        ("it's", []),
        ('"50%_off"', []),
        ("x", ["c"]),
    ],
)
def test_it_filters_cases_by_a_whole_tag(tag, expected, bob, run):
    rows = listed(bob, "cases", {"tag": tag, "suite": str(run.suite.uuid)})
    assert keys(r["key"] for r in rows) == expected
    assert (
        keys(cases_tagged(Case.objects.filter(suite=run.suite), tag).values_list("key", flat=True))
        == expected
    )


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("reg", ["a", "a", "z"]),
        ("regression", ["b"]),
        (ODD, ["c", "c"]),
        ("re_", []),
    ],
)
def test_it_filters_trials_by_their_case_tag(tag, expected, bob, run, other_run):
    case_keys = {str(c.uuid): c.key for c in Case.objects.all()}
    rows = listed(bob, "trials", {"tag": tag})
    assert keys(case_keys[r["case"]] for r in rows) == expected
    assert (
        keys(trials_tagged(Trial.objects.all(), tag).values_list("case__key", flat=True))
        == expected
    )


def test_a_tag_filter_works_inside_a_subquery(run, other_run):
    tagged = Case.objects.filter(has_tag("tags", "reg"))
    trials = Trial.objects.filter(case__in=tagged).values_list("case__key", flat=True)
    assert keys(trials) == ["a", "a", "z"]


def test_it_filters_trials_by_case_suite_run_and_status(bob, run, other_run):
    case_a = Case.objects.get(suite=run.suite, key="a")
    rows = listed(bob, "trials", {"case": str(case_a.uuid)})
    assert sorted(r["attempt"] for r in rows) == [1, 2]
    assert len(listed(bob, "trials", {"suite": str(other_run.suite.uuid)})) == 1
    assert len(listed(bob, "trials", {"run": str(run.uuid)})) == 8
    rows = listed(bob, "trials", {"run": str(run.uuid), "status": "error"})
    assert [(r["case"], r["attempt"]) for r in rows] == [(str(case_a.uuid), 2)]
    rows = listed(bob, "trials", {"tag": "reg", "status": "ok", "suite": str(run.suite.uuid)})
    assert [(r["case"], r["attempt"]) for r in rows] == [(str(case_a.uuid), 1)]


def test_it_filters_grades_by_run_suite_and_status(bob, run, other_run):
    assert len(listed(bob, "grades", {"run": str(run.uuid)})) == 7
    assert len(listed(bob, "grades", {"suite": str(other_run.suite.uuid)})) == 1
    rows = listed(bob, "grades", {"run": str(run.uuid), "status": "error"})
    assert [r["passed"] for r in rows] == [None]
    assert Grade.objects.filter(status="error").count() == 1


def test_it_filters_runs_by_suite_and_status(bob, run, other_run):
    Run.objects.filter(id=other_run.id).update(status=Run.Status.FAILED)
    assert [r["name"] for r in listed(bob, "runs", {"status": "failed"})] == ["R9"]
    assert [r["name"] for r in listed(bob, "runs", {"suite": str(run.suite.uuid)})] == ["R1"]


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("runs", "queued, running, succeeded, failed, cancelled, pruning, imported"),
        ("trials", "queued, running, ok, error, cancelled"),
        ("grades", "ok, error, not_judged"),
    ],
)
def test_an_unknown_status_is_a_400_listing_the_allowed_ones(path, allowed, bob, run):
    response = client_for(bob).get(f"/api/{path}/", {"status": "done"})
    assert response.status_code == 400
    assert response.json() == {"status": [f"unknown status 'done'; allowed: {allowed}"]}


@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("cases", "suite"),
        ("runs", "suite"),
        ("trials", "run"),
        ("trials", "case"),
        ("trials", "suite"),
        ("grades", "run"),
        ("grades", "suite"),
        ("baselines", "suite"),
    ],
)
def test_a_parameter_that_is_not_a_uuid_is_a_400_naming_it(path, param, bob, run):
    response = client_for(bob).get(f"/api/{path}/", {param: "12'; drop"})
    assert response.status_code == 400
    assert param in response.json()


def test_a_nul_character_in_a_tag_is_a_400(bob, run):
    for path in ("cases", "trials"):
        response = client_for(bob).get(f"/api/{path}/", {"tag": "a\x00b"})
        assert response.status_code == 400 and response.json()["field"] == "tag"


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("cases", {"tag": "reg"}),
        ("trials", {"tag": "reg", "status": "ok"}),
        ("grades", {"status": "ok"}),
        ("runs", {"status": "succeeded"}),
    ],
)
def test_filtered_lists_follow_the_viewer_roles(path, params, alice, bob, carol, mallory, run):
    for user in (alice, bob, carol):
        assert client_for(user).get(f"/api/{path}/", params).status_code == 200
    assert client_for(mallory).get(f"/api/{path}/", params).status_code == 403
    assert APIClient().get(f"/api/{path}/", params).status_code == 401


def test_a_tags_value_that_is_not_a_list_matches_nothing(run):
    Case.objects.filter(key="f").update(tags="reg")  # a bare JSON string, not a list
    assert keys(cases_tagged(Case.objects.all(), "reg").values_list("key", flat=True)) == ["a"]


@pytest.mark.parametrize("path", ["suites", "cases", "runs", "trials", "grades", "baselines"])
def test_a_malformed_detail_id_is_403_for_outsiders_and_404_for_viewers(path, bob, mallory):
    for bad in ("0.5", "null", "x'y"):
        assert client_for(mallory).get(f"/api/{path}/{bad}/").status_code == 403
        assert APIClient().get(f"/api/{path}/{bad}/").status_code == 401
        assert client_for(bob).get(f"/api/{path}/{bad}/").status_code == 404
