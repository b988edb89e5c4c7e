"""Blind reviewing everywhere (``evals.blindness``): a role x surface matrix.

Fixture: a judged run of 4 cases (trial i's judge reason is ``JUDGE-REASONING-0i``), each
trial with a gold label (imported, critique ``GOLD-CRITIQUE-0i``) and a gold grade
(``human-label``, reason ``GOLD-GRADE-0i``), another reviewer's label (critique
``DAVE-CRITIQUE-0i``), and a calibration set of trials 1..3. Bob (reviewer) labels trial 2
(``BOB-CRITIQUE-02``) and, when his set is done, trials 1 and 3 too. Every surface is asked
about trial 1 (case c01), or its run.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evals.blindness import GOLD_GRADER, blind_trial_ids, grades_visible_to
from evals.models import Grade, Run, Trial
from labeling.models import Label
from tests.conftest import PASSWORD
from tests.labeling_builders import calibration_set, judged_run

JUDGE = "JUDGE-REASONING-01"
GOLD_GRADE = "GOLD-GRADE-01"
GOLD_LABEL = "GOLD-CRITIQUE-01"
OTHER = "DAVE-CRITIQUE-01"
OWN = "BOB-CRITIQUE-02"

# What each surface can show: grades (judge verdicts, gold grade), labels, or neither.
SURFACES = {
    "trial page": ({"grades", "labels"}, lambda w: f"/trials/{w['trial'].uuid}/"),
    "run page": ({"grades"}, lambda w: f"/runs/{w['run'].uuid}/"),
    "/api/runs/<id>/": ({"grades"}, lambda w: f"/api/runs/{w['run'].uuid}/"),
    "run-case page": (
        {"grades", "labels"},
        lambda w: f"/runs/{w['run'].uuid}/cases/{w['trial'].case.uuid}/",
    ),
    "run export csv": ({"grades"}, lambda w: f"/runs/{w['run'].uuid}/export/?format=csv"),
    "run export csv (api)": ({"grades"}, lambda w: f"/api/runs/{w['run'].uuid}/export"),
    "run export json (api)": (
        {"grades"},
        lambda w: f"/api/runs/{w['run'].uuid}/export?format=json",
    ),
    "labels export": ({"labels"}, lambda w: f"/runs/{w['run'].uuid}/labels/export/?format=csv"),
    "labels export (api)": ({"labels"}, lambda w: f"/api/runs/{w['run'].uuid}/labels-export"),
    "/api/grades/": ({"grades"}, lambda w: f"/api/grades/?run={w['run'].uuid}"),
    "/api/trials/": (set(), lambda w: f"/api/trials/{w['trial'].uuid}/"),
    "/api/labels/": ({"labels"}, lambda w: "/api/labels/"),
    "comparison case view": (
        {"grades"},
        lambda w: f"/runs/{w['run'].uuid}/compare/{w['base'].uuid}/cases/{w['trial'].case.uuid}/",
    ),
}
ROLES = ("reviewer with open items", "reviewer without", "engineer", "lead")


def _label(trial, text, *, reviewer=None, name=""):
    Label.objects.create(
        trial=trial,
        reviewer=reviewer,
        reviewer_name=name,
        verdict="fail",
        critique=text,
        source=Label.Source.REVIEWER if reviewer else Label.Source.IMPORT,
    )


@pytest.fixture
def world(db, alice, bob, carol):
    run, version, trials = judged_run(4, judge_fails=2)
    dave = User.objects.create_user(username="dave", password=PASSWORD)
    dave.groups.add(Group.objects.get(name="reviewer"))
    for i, t in enumerate(trials, start=1):
        Grade.objects.create(
            trial=t, grader=GOLD_GRADER, passed=False, reason=f"GOLD-GRADE-{i:02d}"
        )
        _label(t, f"GOLD-CRITIQUE-{i:02d}", name="dataset gold")
        _label(t, f"DAVE-CRITIQUE-{i:02d}", reviewer=dave)
    calibration_set(run, version, trials[:3])
    _label(trials[1], OWN, reviewer=bob)
    base = Run.objects.create(suite=run.suite, name="base", status=Run.Status.SUCCEEDED)
    for t in trials:
        Trial.objects.create(run=base, case=t.case, attempt=1, status="ok", output="old")
    return {"run": run, "base": base, "trial": trials[0], "trials": trials}


def _as(role, world, alice, bob, carol):
    if role == "reviewer without":
        for t in (world["trials"][0], world["trials"][2]):
            _label(t, "bob again", reviewer=bob)
    return {"engineer": carol, "lead": alice}.get(role, bob)


@pytest.mark.parametrize("surface", list(SURFACES))
@pytest.mark.parametrize("role", ROLES)
def test_each_role_sees_on_each_surface_only_what_blindness_allows(
    client, world, alice, bob, carol, role, surface
):
    shows, url = SURFACES[surface]
    client.force_login(_as(role, world, alice, bob, carol))
    response = client.get(url(world))
    assert response.status_code == 200, response.content[:300]
    body = b"".join(response.streaming_content) if response.streaming else response.content
    text = body.decode()
    sees_verdicts = role != "reviewer with open items"
    sees_all_labels = role in ("engineer", "lead")
    expect = {
        JUDGE: "grades" in shows and sees_verdicts,
        GOLD_GRADE: "grades" in shows and sees_verdicts,
        GOLD_LABEL: "labels" in shows and sees_all_labels,
        OTHER: "labels" in shows and sees_all_labels,
        OWN: "labels" in shows and surface not in ("trial page", "run-case page"),
    }
    # The trial and run-case pages are asked about trial 1; bob's own label is on trial 2
    # (and on trial 1 once his set is done).
    if surface in ("trial page", "run-case page") and role == "reviewer without":
        expect["bob again"] = True
    found = {needle: needle in text for needle in expect}
    assert found == expect
    answered = [str(t.uuid) for t in world["trials"]] + [str(world["run"].uuid), "c01"]
    assert any(word in text for word in answered)  # the surface did answer about the run


def test_the_rule_lives_in_one_selector(world, alice, bob, carol):
    trials = world["trials"]
    # Trials 1..3 and the base run's trials of the same cases (one group each); trial 4's
    # case is in no set.
    same_cases = Trial.objects.filter(run=world["base"], case__in=[t.case for t in trials[:3]])
    assert blind_trial_ids(bob) == {t.id for t in trials[:3]} | {t.id for t in same_cases}
    assert blind_trial_ids(carol) == blind_trial_ids(alice) == frozenset()
    hidden = Grade.objects.filter(trial=trials[0]).exclude(
        id__in=grades_visible_to(Grade.objects.all(), bob)
    )
    assert hidden.count() == Grade.objects.filter(trial=trials[0]).count() == 2  # judge, gold
    # Trial 4 is in no calibration set: its verdicts stay visible to a reviewer.
    assert grades_visible_to(Grade.objects.filter(trial=trials[3]), bob).count() == 2


def test_a_blind_grade_is_a_404_by_id(client, world, bob):
    grade = Grade.objects.get(trial=world["trial"], judge_version__isnull=False)
    client.force_login(bob)
    assert client.get(f"/api/grades/{grade.id}/").status_code == 404
    other = Grade.objects.get(trial=world["trials"][3], judge_version__isnull=False)
    assert client.get(f"/api/grades/{other.id}/").status_code == 200


def test_the_trial_page_says_why_verdicts_are_hidden(client, world, bob, carol):
    client.force_login(bob)
    assert b"blind-note" in client.get(f"/trials/{world['trial'].uuid}/").content
    client.force_login(carol)
    assert b"blind-note" not in client.get(f"/trials/{world['trial'].uuid}/").content


@pytest.mark.parametrize("url", ["trial", "case"])
def test_blindness_costs_one_query_per_page(client, world, bob, carol, url):
    t = world["trial"]
    path = (
        f"/trials/{t.uuid}/"
        if url == "trial"
        else f"/runs/{world['run'].uuid}/cases/{t.case.uuid}/"
    )
    counts = {}
    for user in (carol, bob):
        client.force_login(user)
        client.get(path)  # warm the session
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(path).status_code == 200
        counts[user.username] = len(ctx.captured_queries)
    assert counts["bob"] <= counts["carol"] + 1, counts


# The comparison's own surfaces name each case's pass counts (which repeat the verdicts):
# closed to a reviewer with open items, open to everyone else.
COMPARISON_SURFACES = {
    "comparison page": lambda w: f"/runs/{w['run'].uuid}/compare/{w['base'].uuid}/",
    "comparison export": lambda w: (
        f"/runs/{w['run'].uuid}/compare/{w['base'].uuid}/export/?format=csv"
    ),
    "/api/comparisons/": lambda w: f"/api/comparisons/?base={w['base'].uuid}&head={w['run'].uuid}",
}


@pytest.mark.parametrize("surface", list(COMPARISON_SURFACES))
@pytest.mark.parametrize("role", ROLES)
def test_a_comparison_is_closed_to_a_reviewer_with_open_items(
    client, world, alice, bob, carol, role, surface
):
    client.force_login(_as(role, world, alice, bob, carol))
    response = client.get(COMPARISON_SURFACES[surface](world))
    body = b"".join(response.streaming_content) if response.streaming else response.content
    text = body.decode()
    if role == "reviewer with open items":
        if surface == "comparison page":
            assert response.status_code == 200
            assert 'id="blind-comparison-note"' in text and "gate-decision" not in text
        else:
            assert response.status_code == 403
        assert ">c01<" not in text and "hidden while you label" in text.lower()
    else:
        assert response.status_code == 200, text[:300]
        assert "c01" in text


def test_the_gate_api_is_closed_to_a_reviewer_with_open_items(client, world, bob, carol):
    body = {"base": str(world["base"].uuid), "head": str(world["run"].uuid)}
    for user, status in ((bob, 403), (carol, 200)):
        client.force_login(user)
        response = client.post("/api/gate", body, content_type="application/json")
        assert response.status_code == status, response.content[:300]


@pytest.mark.parametrize("role", ROLES)
def test_the_suite_page_trend_withholds_a_blind_runs_pass_rate(
    client, world, alice, bob, carol, role
):
    client.force_login(_as(role, world, alice, bob, carol))
    text = client.get(f"/suites/{world['run'].suite.uuid}/").content.decode()
    mark = f'data-run="{world["run"].uuid}"'  # the run's point on the trend
    if role == "reviewer with open items":
        assert mark not in text and "hidden while you label" in text
    else:
        assert mark in text and "hidden while you label" not in text
