"""Navigation by role (issue 16, point 6): every link a page shows a user leads to a page that
user may open. A crawl from the run list, as a reviewer, an engineer and a lead, over two runs
of a suite (with a judge), visiting each kind of page once (URLs with ids folded together)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.comparison_builders import db_run, judge_version
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db

HREF = re.compile(r'href="(/[^"#]*)"')
ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d+")
SKIP = ("/admin/", "/accounts/logout", "/static/", "/api/schema")
MAX_PAGES = 60


def _pattern(url: str) -> str:
    path, _, query = url.partition("?")
    keys = sorted(part.split("=")[0] for part in query.split("&") if part)
    return ID.sub("X", path) + "?" + "&".join(keys)


def _crawl(client) -> dict[str, int]:
    seen: dict[str, int] = {}
    patterns: set[str] = set()
    todo = [reverse("evals:run-list")]
    while todo and len(seen) < MAX_PAGES:
        url = todo.pop(0)
        if url.startswith(SKIP) or _pattern(url) in patterns:
            continue
        patterns.add(_pattern(url))
        response = client.get(url)
        seen[url] = response.status_code
        if response.status_code == 200 and "text/html" in response.get("Content-Type", ""):
            todo += [h.replace("&amp;", "&") for h in HREF.findall(response.content.decode())]
    return seen


def test_no_link_leads_a_role_to_a_page_it_may_not_open(client, alice, bob, carol):
    version = judge_version(1)
    db_run({"c1": "PP", "c2": "PF", "c3": "XP"}, name="base", version=version)
    db_run({"c1": "PF", "c2": "FF", "c3": "PP"}, name="head", version=version)
    for user in (bob, carol, alice):
        assert client.login(username=user.username, password=PASSWORD)
        seen = _crawl(client)
        bad = {url: code for url, code in seen.items() if code in (403, 500)}
        assert not bad, f"{user.username} is shown links to {bad}"
        assert len(seen) >= 8, seen  # the crawl really went somewhere
        # The case editor ("Add as a case", "New case", edit): engineers and leads only.
        editor = {u for u in seen if u.startswith("/cases/new/") or u.endswith("/edit/")}
        if user == bob:
            assert not editor, editor
        else:
            assert any("?trial=" in u for u in editor), sorted(seen)
            assert any(u.endswith("/edit/") for u in editor), sorted(seen)
        client.logout()


def test_a_403_names_the_role_needed_who_you_are_and_who_grants_roles(client, bob):
    assert client.login(username=bob.username, password=PASSWORD)
    nav = client.get(reverse("evals:run-list")).content.decode()
    assert reverse("interop:import-upload") not in nav  # a reviewer may not import
    response = client.get(reverse("interop:import-upload"))
    page = response.content.decode()
    assert response.status_code == 403
    assert "This page needs the role engineer or lead." in page
    assert "signed in as <strong>bob</strong>, with the role reviewer" in page
    assert "an administrator grants one in the admin" in page
