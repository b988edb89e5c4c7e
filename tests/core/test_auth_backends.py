"""core.auth_backends.RolesModelBackend: the session's user and their roles in one query,
with ModelBackend's rules (inactive users are not logged in; passwords checked as before)."""

from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from core.auth_backends import RolesModelBackend
from core.roles import ENGINEER, LEAD, REVIEWER, user_roles
from tests.conftest import PASSWORD


def test_it_reads_the_user_and_their_roles_in_one_query(carol):
    carol.groups.add(Group.objects.get(name=REVIEWER))
    with CaptureQueriesContext(connection) as ctx:
        user = RolesModelBackend().get_user(carol.pk)
        assert user_roles(user) == {ENGINEER, REVIEWER}
    assert len(ctx.captured_queries) == 1
    assert (user.pk, user.username, user.password) == (carol.pk, "carol", carol.password)


def test_an_unknown_or_inactive_user_is_nobody(mallory):
    assert RolesModelBackend().get_user(mallory.pk + 1000) is None
    assert user_roles(RolesModelBackend().get_user(mallory.pk)) == frozenset()
    mallory.is_active = False
    mallory.save(update_fields=["is_active"])
    assert RolesModelBackend().get_user(mallory.pk) is None


def test_a_page_reads_the_session_user_with_their_roles(alice):
    client = Client()
    assert client.login(username="alice", password=PASSWORD)
    client.get("/calibration-sets/")
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/calibration-sets/").status_code == 200
    users = [q["sql"] for q in ctx.captured_queries if '"auth_user"' in q["sql"]]
    groups = [q["sql"] for q in ctx.captured_queries if '"auth_group"' in q["sql"]]
    assert len(users) == 1 and groups == users  # one query for both


def test_a_role_given_between_two_requests_counts_on_the_next(mallory):
    client = Client()
    assert client.login(username="mallory", password=PASSWORD)
    assert client.get("/calibration-sets/").status_code == 403
    mallory.groups.add(Group.objects.get(name=LEAD))
    assert client.get("/calibration-sets/").status_code == 200


def test_a_wrong_password_still_fails(bob):
    assert not Client().login(username="bob", password="wrong")
