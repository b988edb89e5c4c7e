"""A logged-in browser session cannot post to the API without the CSRF token."""

import json

import pytest
from django.test import Client

from evals.models import Case, Run, Suite


@pytest.mark.django_db
def test_a_session_post_without_a_csrf_token_is_refused(carol):
    suite = Suite.objects.create(name="s")
    Case.objects.create(suite=suite, key="c1", input="q", expected="a")
    run = Run.objects.create(suite=suite, name="r", target_kind="simulated", status="succeeded")
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    response = client.post(
        "/api/baselines/set",
        {"suite": str(suite.uuid), "run": str(run.uuid)},
        content_type="application/json",
    )
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


@pytest.mark.django_db
def test_a_browser_session_with_the_csrf_token_can_ingest(carol):
    """The docs page's "Try it out" posts with the session and the CSRF header: the CSRF
    check reads request.POST before the view reads the raw body, and must leave it unread."""

    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    client.get("/api/docs/")
    token = client.cookies["csrftoken"].value
    body = {
        "suite": "s",
        "run": "r",
        "trials": [{"case_id": "c1", "input": "q", "output": "a", "passed": True}],
    }
    response = client.post(
        "/api/ingest",
        json.dumps(body),
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert response.status_code == 201, response.content
    assert Run.objects.get(name="r").trials.count() == 1
    refused = Client(enforce_csrf_checks=True)
    refused.force_login(carol)
    response = refused.post(
        "/api/ingest", json.dumps({**body, "run": "r2"}), content_type="application/json"
    )
    assert response.status_code == 403 and not Run.objects.filter(name="r2").exists()
