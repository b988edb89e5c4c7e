"""POST /api/ingest writes a batch in a fixed number of queries (issue 17): 5 or 300 trial
records, new cases included (created through COPY on PostgreSQL, ids read back by key)."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evals.models import Case, Grade, Trial
from tests.interop.test_api_ingest import URL, client_for, header, trial

pytestmark = pytest.mark.django_db


def _ingest(client, run: str, n: int) -> int:
    body = {**header(run=run, suite=f"s-{run}"), "trials": [trial(i) for i in range(n)]}
    with CaptureQueriesContext(connection) as ctx:
        response = client.post(URL, data=json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content[:300]
    return len(ctx.captured_queries)


def test_the_queries_of_an_ingest_do_not_grow_with_its_records(alice):
    client = client_for(alice)
    _ingest(client, "warm", 2)  # the token's last_used_at, written once a minute
    small, large = _ingest(client, "small", 5), _ingest(client, "large", 300)
    assert small == large
    cases = Case.objects.filter(suite__name="s-large")
    assert cases.count() == 300
    assert Trial.objects.filter(run__name="large").count() == 300
    assert Grade.objects.filter(trial__run__name="large").count() == 300
    # Every trial points at the case of its own key (ids read back by key, not by order).
    for t in Trial.objects.filter(run__name="large").select_related("case")[:50]:
        assert t.case.key == f"c{t.case.input.split()[-1]}"
