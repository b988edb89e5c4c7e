"""Input from outside that a new user's probing turned into 500s (fresh-eyes trial, issue 13
point 8's kind): a time zone cookie or ``?tz=`` naming a folder of the zone database or far
too long, JSON nested past the limit or holding NaN in a form's JSON field, a malformed
trial id in a label post, NaN/Infinity in a config file, and a key twice in an API body.
Each is a clear refusal naming the field, never a 500."""

from __future__ import annotations

import json
import tomllib

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from core.errors import DomainError
from core.zones import zone_parse
from evals.models import Run
from interop.config import config_apply
from tests.conftest import PASSWORD
from tests.evals.test_views_runs import make_suite, start_form
from tests.judges.test_views_judge_versions import form as judge_form
from tests.labeling_builders import calibration_set, judged_run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("name", ["Europe", "America", "Etc", "../etc/passwd", "A" * 300, "x\x00"])
def test_a_malformed_zone_name_is_no_zone(name):
    assert zone_parse(name) is None


def test_a_real_zone_name_is_a_zone():
    assert str(zone_parse("America/Argentina/Salta")) == "America/Argentina/Salta"
    assert str(zone_parse("Etc/GMT+3")) == "Etc/GMT+3"


@pytest.mark.parametrize("cookie", ["Europe", "America", "A" * 300])
def test_a_folder_or_overlong_zone_cookie_is_ignored_not_a_500(client, carol, cookie):
    client.cookies["assay_tz"] = cookie
    assert client.get("/accounts/login/").status_code == 200
    assert client.login(username=carol.username, password=PASSWORD)
    client.cookies["assay_tz"] = cookie
    assert client.get(reverse("evals:run-list")).status_code == 200


@pytest.mark.parametrize("tz", ["Europe", "A" * 300])
def test_an_export_with_a_folder_or_overlong_tz_is_a_400_naming_it(client, carol, tz):
    suite = make_suite()
    run = Run.objects.create(suite=suite, name="r", target_kind="simulated")
    assert client.login(username=carol.username, password=PASSWORD)
    response = client.get(
        reverse("interop:run-export", kwargs={"run_id": run.uuid}), {"format": "csv", "tz": tz}
    )
    assert response.status_code == 400 and "tz: unknown time zone" in response.content.decode()
    api = APIClient()
    api.force_authenticate(carol)
    answer = api.get(f"/api/runs/{run.uuid}/export", {"format": "csv", "tz": tz})
    assert answer.status_code == 400


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("graders", "[" * 5000 + "]" * 5000, "nested too deeply"),
        ("settings_json", '{"a":' * 3000 + "1" + "}" * 3000, "nested too deeply"),
        ("settings_json", '{"temperature": NaN}', "NaN and Infinity are not valid JSON"),
        ("settings_json", '{"a": 1, "a": 2}', "appears twice in one object"),
    ],
)
def test_a_run_form_json_field_nested_too_deep_or_with_nan_is_a_form_error(
    client, carol, field, value, words
):
    suite = make_suite()
    assert client.login(username=carol.username, password=PASSWORD)
    response = client.post(reverse("evals:run-new"), start_form(suite, **{field: value}))
    assert response.status_code == 200 and words in response.content.decode()
    assert not Run.objects.exists()


def test_a_judge_form_with_nan_says_so_not_concurrent_writers(client, carol):
    assert client.login(username=carol.username, password=PASSWORD)
    page = client.post(
        reverse("judges:version-new"), judge_form(params_json='{"temperature": NaN}')
    ).content.decode()
    assert "NaN and Infinity are not valid JSON" in page and "concurrent writers" not in page


def test_a_malformed_trial_id_in_a_label_post_is_a_404(client, bob):
    run, version, trials = judged_run(3)
    cset = calibration_set(run, version, trials)
    assert client.login(username=bob.username, password=PASSWORD)
    response = client.post(
        reverse("labeling:label-save", args=[cset.uuid]), {"trial": "zzz", "verdict": "pass"}
    )
    assert response.status_code == 404


@pytest.mark.parametrize("literal", ["nan", "inf", "-inf"])
def test_nan_or_infinity_in_a_config_file_is_refused_naming_the_field(literal):
    document = tomllib.loads(
        f'[suites.s]\ncases = [{{ key = "c1", input = "q", expected = {literal} }}]\n'
    )
    with pytest.raises(DomainError) as info:
        config_apply(document=document)
    assert info.value.field == "suites.s.cases[0].expected"


def test_a_key_twice_in_an_api_body_is_a_400_not_the_last_one(carol):
    suite = make_suite()
    api = APIClient()
    api.force_authenticate(carol)
    body = (
        f'{{"suite": "{suite.uuid}", "name": "z6", "name": "z7", '
        '"target": {"kind": "simulated", "seed": 1}, "graders": [{"key": "e", "kind": "exact"}]}'
    )
    answer = api.post("/api/runs/start", body, content_type="application/json")
    assert answer.status_code == 400 and "appears twice in one object" in json.dumps(answer.json())
    assert not Run.objects.exists()
