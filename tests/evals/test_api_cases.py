"""The case editor's API (``evals.api.cases``): add, edit and retire a suite's cases through
the same services as the pages, with the same answers to a key clash, a stale edit and
hostile content (400/409 naming the field), engineers and leads only."""

from __future__ import annotations

import json

import pytest

from evals.models import Case, CaseChange, Run, Suite, Trial
from tests.core.test_api_core import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def suite(db) -> Suite:
    return Suite.objects.create(name="golden")


def url(suite: Suite, case: Case | None = None, action: str = "") -> str:
    base = f"/api/suites/{suite.uuid}/cases"
    return base + (f"/{case.uuid}" if case else "") + (f"/{action}" if action else "")


BODY = {"key": "c1", "input": "What is 2+2?", "expected": "4", "tags": ["math"]}


def etag(api, suite: Suite, case: Case) -> str:
    """The case's ETag as a client reads it (GET the edit URL)."""
    response = api.get(url(suite, case))
    assert response.status_code == 200, response.content
    return response["ETag"]


def test_an_engineer_adds_edits_retags_and_retires_a_case(suite, carol):
    api = client_for(carol)
    created = api.post(url(suite), BODY, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["action"] == "created" and body["case"]["key"] == "c1"
    case = Case.objects.get(uuid=body["case"]["uuid"])
    again = api.post(url(suite), BODY, format="json")
    assert again.status_code == 200 and again.json()["action"] == "unchanged"

    read = etag(api, suite, case)
    edited = api.patch(url(suite, case), {"expected": False}, format="json", HTTP_IF_MATCH=read)
    assert edited.status_code == 200 and edited.json()["action"] == "replaced"
    new = Case.objects.get(uuid=edited.json()["case"]["uuid"])
    assert new.expected is False and new.input == "What is 2+2?" and new.tags == ["math"]
    case.refresh_from_db()
    assert case.replaced_by == new

    stale = api.patch(url(suite, case), {"expected": "5"}, format="json", HTTP_IF_MATCH=read)
    assert stale.status_code == 409 and stale.json()["field"] == "case"

    assert edited["ETag"] == etag(api, suite, new)
    retagged = api.patch(
        url(suite, new), {"tags": ["math", "bool"]}, format="json", HTTP_IF_MATCH=edited["ETag"]
    )
    assert retagged.json()["action"] == "retagged" and retagged.json()["case"]["uuid"] == str(
        new.uuid
    )
    goal = api.patch(
        url(suite, new), {"goal_state": {"x": 1}}, format="json", HTTP_IF_MATCH=retagged["ETag"]
    )
    assert goal.json()["action"] == "replaced" and goal.json()["case"]["goal_state"] == {"x": 1}
    latest = Case.objects.active().get(suite=suite, key="c1")

    retired = api.post(url(suite, latest, "retire"))
    assert retired.status_code == 200 and retired.json()["case"]["retired_at"] is not None
    assert api.post(url(suite, latest, "retire")).status_code == 409
    actions = list(CaseChange.objects.order_by("id").values_list("action", "via", "by"))
    assert actions == [
        ("created", "api", carol.id),
        ("replaced", "api", carol.id),
        ("retagged", "api", carol.id),
        ("replaced", "api", carol.id),
        ("retired", "api", carol.id),
    ]


def test_a_tag_edit_from_a_stale_read_is_refused_and_changes_nothing(suite, alice, carol):
    case = Case.objects.create(suite=suite, key="c1", input="q", tags=["math"])
    lead, engineer = client_for(alice), client_for(carol)
    seen_by_carol = etag(engineer, suite, case)
    done = lead.patch(
        url(suite, case),
        {"tags": ["math", "hard"]},
        format="json",
        HTTP_IF_MATCH=etag(lead, suite, case),
    )
    assert done.status_code == 200 and done.json()["action"] == "retagged"

    stale = engineer.patch(
        url(suite, case), {"tags": ["math", "easy"]}, format="json", HTTP_IF_MATCH=seen_by_carol
    )
    assert stale.status_code == 412
    body = stale.json()
    assert body["field"] == "If-Match" and body["etag"] == done["ETag"]
    assert "changed since you read it by alice (tags now: math, hard)" in body["detail"]
    missing = engineer.patch(url(suite, case), {"tags": ["easy"]}, format="json")
    assert missing.status_code == 428 and missing.json()["field"] == "If-Match"
    case.refresh_from_db()
    assert case.tags == ["math", "hard"]
    assert not CaseChange.objects.filter(by=carol).exists()

    again = engineer.patch(
        url(suite, case), {"tags": ["math", "easy"]}, format="json", HTTP_IF_MATCH=body["etag"]
    )
    assert again.status_code == 200 and again.json()["case"]["tags"] == ["math", "easy"]
    anyway = engineer.patch(url(suite, case), {"tags": []}, format="json", HTTP_IF_MATCH="*")
    assert anyway.status_code == 200 and anyway.json()["action"] == "retagged"


def test_a_key_clash_is_a_409_unless_replace_is_true(suite, alice):
    api = client_for(alice)
    assert api.post(url(suite), BODY, format="json").status_code == 201
    clash = api.post(url(suite), {**BODY, "expected": "5"}, format="json")
    assert clash.status_code == 409 and clash.json()["field"] == "key"
    assert Case.objects.get().expected == "4"
    replaced = api.post(url(suite), {**BODY, "expected": "5", "replace": True}, format="json")
    assert replaced.status_code == 201 and replaced.json()["action"] == "replaced"


def test_a_case_added_from_a_trial_records_it(suite, carol):
    case = Case.objects.create(suite=suite, key="seed", input="q")
    run = Run.objects.create(suite=suite, name="r", target_kind="imported", status="succeeded")
    trial = Trial.objects.create(run=run, case=case, attempt=1, status="ok", output="a")
    body = {**BODY, "source_trial": str(trial.uuid)}
    assert client_for(carol).post(url(suite), body, format="json").status_code == 201
    assert CaseChange.objects.get(case__key="c1").source_trial == trial


def test_reviewers_outsiders_and_anonymous_callers_are_refused(suite, bob, mallory, carol):
    case = Case.objects.create(suite=suite, key="c0", input="q")
    for user, code in ((bob, 403), (mallory, 403), (None, 401)):
        api = client_for(user)
        assert api.post(url(suite), BODY, format="json").status_code == code
        assert api.patch(url(suite, case), {"expected": "x"}, format="json").status_code == code
        assert api.post(url(suite, case, "retire")).status_code == code
    assert Case.objects.count() == 1 and Case.objects.get().retired_at is None


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"key": "c1", "input": "a\\u0000b"}', "input"),
        ('{"key": "c1", "input": "q", "tags": ["\\ud800"]}', "tags[0]"),
        ('{"key": "c1", "input": "q", "expected": NaN}', None),
        ('{"key": "c1", "input": "q", "expected": 1, "expected": 2}', None),
        ('{"key": " c1", "input": "q"}', "key"),
        ('{"key": "c1", "input": ["a"]}', "input"),
        ('{"key": "c1", "input": "q", "context": [{"id": 1, "text": "t"}]}', "context[0].id"),
        (
            '{"key": "c1", "input": "q", "context": [{"id": "d", "text": "t"}, '
            '{"id": "d", "text": "u"}]}',
            "context[1].id",
        ),
        (
            '{"key": "c1", "input": "q", "context": [{"id": "d", "text": "a\\u0000"}]}',
            "context[0].text",
        ),
        ('{"key": "c1", "input": "q", "tags": ["ok", "' + "t" * 101 + '"]}', "tags[1]"),
        ('{"key": "c1", "input": "q", "tags": ["a", "b", "a"]}', "tags[2]"),
        ('{"key": "c1", "input": "q", "context": [{"id": "d"}]}', "context[0]"),
        ('{"key": "c1", "input": "q", "replace": "true"}', "replace"),
        ('{"key": "c1", "input": "q", "colour": "red"}', "colour"),
    ],
)
def test_hostile_or_malformed_bodies_are_a_400_naming_the_field(suite, carol, raw, field):
    response = client_for(carol).post(url(suite), raw, content_type="application/json")
    assert response.status_code == 400, response.content
    body = response.json()
    if field is not None:
        assert body.get("field") == field or field in body, body
    assert not Case.objects.exists()


def test_unknown_suite_case_or_trial_is_a_404(suite, carol):
    api = client_for(carol)
    other = Suite.objects.create(name="other")
    case = Case.objects.create(suite=other, key="c0", input="q")
    assert api.post("/api/suites/not-a-uuid/cases", BODY, format="json").status_code == 404
    assert api.patch(url(suite, case), {"tags": []}, format="json").status_code == 404
    assert api.get(url(suite, case)).status_code == 404
    body = {**BODY, "source_trial": "00000000-0000-0000-0000-000000000000"}
    missing = api.post(url(suite), json.dumps(body), content_type="application/json")
    assert missing.status_code == 404 and missing.json()["field"] == "source_trial"
    assert not Case.objects.filter(suite=suite).exists()
