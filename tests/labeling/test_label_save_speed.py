"""The label save's work per request: one role lookup, a fixed number of queries whatever
the set's size, and a ``Server-Timing`` header for the benchmark."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from core.roles import LEAD, REVIEWER, user_has_role
from tests.conftest import PASSWORD
from tests.labeling_builders import calibration_set, judged_run

pytestmark = pytest.mark.django_db


def _save_queries(client, n_items: int, suite: str) -> tuple[list[str], object]:
    run, version, trials = judged_run(
        n_items, judge_fails=n_items // 3, suite_name=suite, judge_name=suite
    )
    cset = calibration_set(run, version, trials)
    url = reverse("labeling:label-save", kwargs={"set_id": cset.uuid})
    with CaptureQueriesContext(connection) as ctx:
        response = client.post(
            url,
            {
                "trial": str(trials[0].uuid),
                "verdict": "pass",
                "critique": "",
                "expected_version": 0,
            },
            HTTP_HX_REQUEST="true",
        )
    assert response.status_code == 200 and "Saved pass." in response.content.decode()
    return [q["sql"] for q in ctx.captured_queries], response


def test_a_save_looks_up_the_reviewers_roles_once_with_the_user(client, bob):
    assert client.login(username="bob", password=PASSWORD)
    sql, _ = _save_queries(client, 10, "s10")
    roles = [q for q in sql if "auth_group" in q]
    assert len(roles) == 1 and '"auth_user"."password"' in roles[0]


def test_a_save_costs_the_same_queries_for_a_small_and_a_large_set(client, bob):
    assert client.login(username="bob", password=PASSWORD)
    small, _ = _save_queries(client, 5, "s5")
    large, _ = _save_queries(client, 60, "s60")
    # 23: session, user with roles, the set with the trial (no output), whether the item is
    # the reviewer's (labeling.assignment: all of a set without an assignment), its run's graders
    # (no contract grader: no decision to derive), the label, its newest revision (its
    # version), the label write (with its savepoints), the revision, freezing the set, the
    # reveal (the trial's sets, their reveals, which are finished), the judge approvals resting
    # on the trial (none: no trust to recheck), in a transaction; then
    # the queue position (ids only), the reviewer's labels, the one item rendered and its
    # version (unlabeled), its notes as the reviewer may read them (labeling.notes). No query
    # loads the other items' outputs.
    assert len(small) == len(large) == 23, small
    assert sum(1 for q in large if '"evals_trial"."output"' in q) == 1


def test_every_response_carries_its_server_time(client, bob):
    assert client.login(username="bob", password=PASSWORD)
    _, response = _save_queries(client, 3, "s3")
    match = re.fullmatch(r"app;dur=(\d+\.\d\d)", response.headers["Server-Timing"])
    assert match and float(match.group(1)) > 0


def test_a_change_of_groups_is_seen_by_the_next_role_check(bob):
    assert user_has_role(bob, REVIEWER) and not user_has_role(bob, LEAD)
    bob.groups.add(Group.objects.get(name=LEAD))
    assert user_has_role(bob, LEAD)
    bob.groups.clear()
    assert not user_has_role(bob, REVIEWER)
