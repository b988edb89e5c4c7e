"""The lead's API token page: create (shown once, stored hashed), list, revoke; leads only."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse
from rest_framework.test import APIClient

from apitokens.models import ApiToken
from apitokens.tokens import token_hash

pytestmark = pytest.mark.django_db
URL = "/api-tokens/"


def _api(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_a_lead_creates_a_token_for_ci_sees_it_once_and_it_works(client, alice, carol):
    client.force_login(alice)
    response = client.post(URL, {"user": "carol", "name": "CI on main"})
    assert response.status_code == 201
    token = response.context["new_token"]
    row = ApiToken.objects.get()
    assert (row.user, row.name, row.key_hash) == (carol, "CI on main", token_hash(token))
    assert f'value="{token}"' in response.content.decode()
    assert _api(token).get("/api/runs/").status_code == 200
    page = client.get(URL).content.decode()
    assert (
        token not in page
        and "CI on main" in page
        and "never" not in page.split("CI on main")[1].split("</tr>")[0]
    )  # used once just now


def test_a_lead_revokes_a_token_and_it_stops_working(client, alice, carol):
    client.force_login(alice)
    token = client.post(URL, {"user": "carol", "name": "ci"}).context["new_token"]
    row = ApiToken.objects.get()
    response = client.post(reverse("apitokens:token-revoke", args=[row.uuid]), follow=True)
    assert "revoked" in response.content.decode()
    assert _api(token).get("/api/runs/").status_code == 401
    again = client.post(reverse("apitokens:token-revoke", args=[row.uuid]), follow=True)
    assert "was already revoked" in again.content.decode()


def test_a_bad_form_is_refused_naming_the_field_and_writes_nothing(client, alice):
    client.force_login(alice)
    response = client.post(URL, {"user": "nobody", "name": ""})
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert set(errors) == {"user", "name"}
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("who", ["bob", "carol", "mallory"])
def test_only_leads_manage_tokens(client, request, who, alice):
    user = request.getfixturevalue(who)
    client.force_login(alice)
    client.post(URL, {"user": "alice", "name": "mine"})
    row = ApiToken.objects.get()
    client.force_login(user)
    assert client.get(URL).status_code == 403
    assert client.post(URL, {"user": who, "name": "x"}).status_code == 403
    assert client.post(reverse("apitokens:token-revoke", args=[row.uuid])).status_code == 403
    assert ApiToken.objects.count() == 1 and ApiToken.objects.get().revoked_at is None
    assert "API tokens" not in client.get("/runs/").content.decode()


def test_the_nav_offers_the_page_to_a_lead(client, alice):
    client.force_login(alice)
    assert f'href="{URL}">API tokens</a>' in client.get("/runs/").content.decode()


def test_the_page_that_shows_a_token_once_is_never_stored_by_the_browser(client, alice):
    client.force_login(alice)
    created = client.post(URL, {"user": "alice", "name": "CI"})
    assert created.status_code == 201
    for response in (created, client.get(URL), client.post(URL, {"user": "", "name": ""})):
        assert "no-store" in response["Cache-Control"]
        assert "private" in response["Cache-Control"]


def test_a_lead_cannot_make_a_token_acting_as_a_reviewer_another_lead_or_a_superuser(
    client, alice, bob
):
    # A token acts as its user: a lead holding one for bob could label as bob, and the
    # labels are the blind human evidence calibration rests on.
    other_lead = User.objects.create_user(username="lena", password="pw-lena-123")
    other_lead.groups.add(Group.objects.get(name="lead"))
    User.objects.create_superuser("root", password="pw-root-123")
    client.force_login(alice)
    for who in ("bob", "lena", "root"):
        response = client.post(URL, {"user": who, "name": "as them"})
        assert response.status_code == 400, who
        assert "token" in response.content.decode()
    assert not ApiToken.objects.exists()
    assert client.post(URL, {"user": "alice", "name": "mine"}).status_code == 201
    row = ApiToken.objects.get()
    assert (row.user, row.created_by) == (alice, alice)
    assert "<td>alice</td>" in client.get(URL).content.decode().replace("\n", "")
