"""The import page: engineers and leads upload; others get 403; errors re-render escaped."""

from __future__ import annotations

import pytest
from django.urls import reverse

from evals.models import Case, Run, Suite
from judges.models import PairwiseVerdict
from tests.conftest import PASSWORD
from tests.import_helpers import PAIR_TEMPLATE, jsonl, record, upload_post

pytestmark = pytest.mark.django_db
URL = "/imports/new/"


def _login(client, user):
    assert client.login(username=user.username, password=PASSWORD)


def _post(client, data: bytes, name="records.jsonl", **fields):
    return upload_post(client, data, name, **fields)


def test_the_url_name_resolves():
    assert reverse("interop:import-upload") == URL


def test_it_shows_the_form_to_an_engineer(client, carol):
    _login(client, carol)
    response = client.get(URL)
    assert response.status_code == 200
    assert b'enctype="multipart/form-data"' in response.content


@pytest.mark.parametrize("who", ["bob", "mallory"])
def test_it_refuses_a_reviewer_and_an_outsider(client, request, who):
    user = request.getfixturevalue(who)
    _login(client, user)
    assert client.get(URL).status_code == 403
    assert _post(client, jsonl([record()])).status_code == 403
    assert Run.objects.count() == 0


def test_it_imports_and_redirects_to_the_new_run(client, alice):
    _login(client, alice)
    response = _post(client, jsonl([record(id="a"), record(id="b")]))
    run = Run.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("evals:run-detail", kwargs={"run_id": run.uuid})
    assert Case.objects.count() == 2


def test_it_stores_both_presentations_of_an_order_inconsistent_pair(client, carol):
    _login(client, carol)
    _post(client, jsonl([record(PAIR_TEMPLATE)]))
    got = dict(PairwiseVerdict.objects.values_list("position", "preferred"))
    assert got == {"original": "A", "swapped": "B"}


def test_it_rerenders_the_form_with_an_escaped_error_and_stores_nothing(client, carol):
    _login(client, carol)
    data = b'case_id,input,created_at\nc1,ok,"""><svg onload=alert(3)>"\n'
    response = _post(
        client,
        data,
        name="results.csv",
        mapping="case_id=case_id\ninput=input\ncreated_at=created_at",
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert "row 1 (line 2): field created_at" in body
    assert "<svg onload" not in body and "&lt;svg onload=alert(3)&gt;" in body
    assert Suite.objects.count() == 0


def test_it_imports_a_large_upload_through_a_temporary_file(client, carol, settings):
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1024
    _login(client, carol)
    recs = [record(id=f"c{i}") for i in range(50)]
    response = _post(client, jsonl(recs))
    assert response.status_code == 302
    assert Case.objects.count() == 50
