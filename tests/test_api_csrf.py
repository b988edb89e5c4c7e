"""A logged-in browser session cannot post to the API without the CSRF token."""

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
        "/api/baselines/set", {"suite": str(suite.uuid), "run": str(run.uuid)},
        content_type="application/json",
    )
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
