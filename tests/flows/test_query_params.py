"""Malformed query parameters are a 400 naming the parameter, on pages and API (issue 13):
never a 500 (``?set=zzz`` on the calibration page was one), never silently ignored."""

from __future__ import annotations

import pytest
from django.test import override_settings
from django.urls import reverse

from tests.core.test_api_core import client_for
from tests.labeling_builders import calibration_set, judged_run

pytestmark = pytest.mark.django_db
BAD = "zzz"


@pytest.fixture
def world(db):
    run, version, trials = judged_run(4, judge_fails=1)
    cset = calibration_set(run, version, trials)
    return run, version, trials, cset


def _pages(run, version, trials, cset) -> list[tuple[str, str, str]]:
    """(url, parameter, who) for every page that reads a query parameter."""
    calibration = reverse("labeling:calibration", kwargs={"version_id": version.uuid})
    queue = reverse("labeling:queue", kwargs={"set_id": cset.uuid})
    return [
        (f"{calibration}?set={BAD}", "set", "alice"),
        (f"{calibration}?suite={BAD}", "suite", "alice"),
        (f"{reverse('labeling:adjudication')}?set={BAD}", "set", "alice"),
        (f"{reverse('labeling:adjudication')}?suite={BAD}", "suite", "alice"),
        (f"{reverse('labeling:set-new')}?run={BAD}", "run", "carol"),
        (f"{reverse('labeling:set-new')}?judge_version={BAD}", "judge_version", "carol"),
        (f"{queue}?trial={BAD}", "trial", "bob"),
        (f"{reverse('evals:run-new')}?suite={BAD}", "suite", "carol"),
        (f"{reverse('evals:run-list')}?page={BAD}", "page", "carol"),
        (f"{reverse('evals:run-list')}?suite={BAD}", "suite", "carol"),
        (f"{reverse('evals:run-list')}?status=exploded", "status", "carol"),
        (
            f"{reverse('evals:comparison-pick', kwargs={'run_id': run.uuid})}?base={BAD}",
            "base",
            "carol",
        ),
        (f"{reverse('judges:version-new')}?from={BAD}", "from", "carol"),
    ]


def test_every_page_answers_a_malformed_parameter_with_a_400_naming_it(
    client, world, alice, bob, carol
):
    users = {"alice": alice, "bob": bob, "carol": carol}
    for url, param, who in _pages(*world):
        client.force_login(users[who])
        response = client.get(url)
        assert response.status_code == 400, (url, response.status_code)
        body = response.content.decode()
        assert f"{param}: expected" in body, (url, body[:300])
        assert "Bad request" in body


@override_settings(DEBUG=True)
def test_under_debug_the_400_page_still_names_the_parameter(client, world, alice, bob, carol):
    """``make demo`` runs with DEBUG=true: there a ``BadRequest`` used to show Django's
    technical debug page (settings, traceback) instead of the "Bad request" page naming the
    parameter; the page is now the same in both modes (``config.middleware``)."""
    users = {"alice": alice, "bob": bob, "carol": carol}
    for url, param, who in _pages(*world):
        client.force_login(users[who])
        response = client.get(url)
        assert response.status_code == 400, (url, response.status_code)
        body = response.content.decode()
        assert f"{param}: expected" in body, (url, body[:300])
        assert "Bad request" in body and "DEBUG = True" not in body, (url, body[:300])


def test_a_malformed_run_list_filter_is_a_400_naming_it_in_plain_words(client, carol):
    client.force_login(carol)
    cases = [
        (f"suite={BAD}", f"suite: expected a UUID, got &#x27;{BAD}&#x27;"),
        ("suite=zzz", "suite: expected a UUID, got &#x27;zzz&#x27;"),
        ("status=exploded", "status: expected one of queued, running, succeeded"),
    ]
    for query, said in cases:
        response = client.get(f"{reverse('evals:run-list')}?{query}")
        body = response.content.decode()
        assert response.status_code == 400, query
        assert said in body, (query, body[:500])
        assert "Select a valid choice" not in body and "Ignored" not in body
    assert client.get(reverse("evals:run-list")).status_code == 200
    assert client.get(f"{reverse('evals:run-list')}?page=99").status_code == 200  # last page


UNKNOWN = "00000000-0000-0000-0000-000000000000"


def test_a_well_formed_unknown_uuid_is_a_404_naming_the_parameter(client, world, alice, bob, carol):
    """An id that names nothing is a 404 saying which parameter, never a silent fallback
    (``/runs/new/?suite=<unknown>`` used to open the form on another suite)."""
    _, version, _, _ = world
    calibration = reverse("labeling:calibration", kwargs={"version_id": version.uuid})
    pages = [
        (f"{calibration}?set={UNKNOWN}", "set: no calibration set", alice),
        (f"{calibration}?suite={UNKNOWN}", "suite: no suite", alice),
        (f"{reverse('evals:run-new')}?suite={UNKNOWN}", "suite: no suite", carol),
        (f"{reverse('evals:run-list')}?suite={UNKNOWN}", "suite: no suite", carol),
        (f"{reverse('evals:case-new')}?suite={UNKNOWN}", "suite: no suite", carol),
        (f"{reverse('evals:case-new')}?trial={UNKNOWN}", "trial: no trial", carol),
        (f"{reverse('evals:case-new')}?case={UNKNOWN}", "case: no case", carol),
        (f"{reverse('labeling:set-new')}?run={UNKNOWN}", "run: no run", carol),
        (
            f"{reverse('labeling:set-new')}?judge_version={UNKNOWN}",
            "judge_version: no judge version",
            carol,
        ),
        (f"{reverse('judges:version-new')}?from={UNKNOWN}", "from: no judge version", carol),
    ]
    for url, said, who in pages:
        client.force_login(who)
        response = client.get(url)
        assert response.status_code == 404, (url, response.status_code)
        body = response.content.decode()
        assert f'<p id="not-found-message">{said} with id {UNKNOWN}</p>' in body, (url, body)
    # A missing page shows no exception class name.
    body = client.get("/no-such-page/").content.decode()
    assert "Not found" in body and "Resolver404" not in body


def test_the_api_answers_malformed_parameters_with_a_400_naming_them(world, carol):
    run, version, _, cset = world
    api = client_for(carol)
    cases = [
        (f"/api/runs/?suite={BAD}", "suite"),
        ("/api/runs/?status=exploded", "status"),
        (f"/api/trials/?run={BAD}", "run"),
        ("/api/runs/?page_size=many", "page_size"),
        ("/api/runs/?cursor=not-a-cursor", "cursor"),
        ("/api/judge-versions/?trusted=yes", "trusted"),
        (f"/api/calibration-sets/?judge_version={BAD}", "judge_version"),
        (f"/api/labels/?trial={BAD}", "trial"),
        (f"/api/comparisons/?base={BAD}&head={run.uuid}", "base"),
        (f"/api/comparisons/?base={run.uuid}&head={run.uuid}&alpha=lots", "alpha"),
        (f"/api/runs/{run.uuid}/export?format=xlsx", "format"),
        (f"/api/runs/{run.uuid}/export?format=csv&tz=Mars/Olympus", "tz"),
        (f"/api/calibration-sets/{cset.uuid}/export?judge_version={BAD}", "judge_version"),
    ]
    for url, param in cases:
        response = api.get(url)
        assert response.status_code == 400, (url, response.status_code, response.content[:200])
        assert param in response.json(), (url, response.json())


def test_the_api_lists_answer_an_unknown_uuid_filter_with_a_404_naming_it(world, carol, alice):
    """As the pages do: a UUID naming nothing is a 404 on the parameter, never an empty
    list that reads as "no runs" (docs/api.md)."""
    lists = [
        ("/api/runs/", "suite", "suite"),
        ("/api/cases/", "suite", "suite"),
        ("/api/trials/", "run", "run"),
        ("/api/trials/", "case", "case"),
        ("/api/trials/", "suite", "suite"),
        ("/api/grades/", "run", "run"),
        ("/api/grades/", "suite", "suite"),
        ("/api/baselines/", "suite", "suite"),
        ("/api/judge-runs/", "run", "run"),
        ("/api/judge-runs/", "judge_version", "judge version"),
        ("/api/labels/", "run", "run"),
        ("/api/labels/", "trial", "trial"),
        ("/api/labels/", "calibration_set", "calibration set"),
        ("/api/calibration-sets/", "suite", "suite"),
        ("/api/calibration-sets/", "judge_version", "judge version"),
    ]
    for who in (carol, alice):
        api = client_for(who)
        for url, param, noun in lists:
            response = api.get(f"{url}?{param}={UNKNOWN}")
            assert response.status_code == 404, (url, param, response.status_code)
            assert response.json() == {
                "detail": f"{param}: no {noun} with id {UNKNOWN}",
                "field": param,
                "record": None,
            }, (url, param)


def test_the_api_lists_filter_by_a_known_uuid(world, carol):
    run, _, _, _ = world
    api = client_for(carol)
    runs = api.get(f"/api/runs/?suite={run.suite.uuid}").json()["results"]
    assert [r["uuid"] for r in runs] == [str(run.uuid)]
    trials = api.get(f"/api/trials/?run={run.uuid}")
    assert trials.status_code == 200 and len(trials.json()["results"]) == run.trials.count()
