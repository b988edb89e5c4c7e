"""apitokens.tokens.token_user reads the token, its user and the user's roles in one query
(issue 17): the roles it hands over are the user's groups, exactly, and nothing reads them
again during the request."""

from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from apitokens.tokens import token_create, token_revoke, token_user
from core.roles import ENGINEER, LEAD, REVIEWER, user_has_role, user_roles


def _token(user) -> str:
    _, token = token_create(user=user, name="ci")
    token_user(token=token)  # the first use writes last_used_at: not what is counted here
    return token


def test_it_reads_the_user_and_their_roles_in_one_query(alice):
    token = _token(alice)
    with CaptureQueriesContext(connection) as ctx:
        user = token_user(token=token)
        assert user_roles(user) == {LEAD}
        assert user_has_role(user, LEAD) and not user_has_role(user, REVIEWER)
    assert len(ctx.captured_queries) == 1
    assert user == alice
    assert (user.username, user.password, user.is_active) == (
        alice.username,
        alice.password,
        True,
    )


def test_a_user_in_two_groups_has_both_roles(carol):
    carol.groups.add(Group.objects.get(name=REVIEWER))
    assert user_roles(token_user(token=_token(carol))) == {ENGINEER, REVIEWER}


def test_a_user_in_no_group_has_no_role(mallory):
    user = token_user(token=_token(mallory))
    assert user == mallory
    assert user_roles(user) == frozenset()


def test_a_revoked_token_an_unknown_one_and_an_inactive_user_get_no_user(bob, carol):
    revoked = _token(bob)
    token_revoke(token=bob.api_tokens.get())
    assert token_user(token=revoked) is None
    assert token_user(token="not-a-token") is None
    inactive = _token(carol)
    carol.is_active = False
    carol.save(update_fields=["is_active"])
    assert token_user(token=inactive) is None


def test_an_api_request_by_token_reads_the_roles_with_the_token(alice, mallory):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {_token(alice)}")
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/api/suites/").status_code == 200
    assert len(ctx.captured_queries) == 2  # token + user + roles, the page
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {_token(mallory)}")
    assert client.get("/api/suites/").status_code == 403
