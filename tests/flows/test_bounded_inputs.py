"""Text and number limits on every path (``core.bounds``: ``TEXT_MAX_CHARS``, ``SEED_MAX``):
the API, the forms, the commands and config as code refuse what is over them naming the
field; deep nesting and huge numbers are plain errors, never a traceback or Python's
integer-size advice."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import RequestDataTooBig
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.urls import reverse

from core import bounds
from core.errors import DomainError
from core.http import bad_request
from evals.forms import RunStartForm
from evals.models import Case, Run, Suite
from interop.config import config_apply
from judges.models import JudgeVersion
from tests.core.test_api_core import client_for
from tests.flows.test_prompt_syntax import judge_form

pytestmark = pytest.mark.django_db

ADVICE = "set_int_max_str_digits"
JUDGE = {
    "name": "helpful",
    "kind": "rubric",
    "model": "judge-model",
    "base_url": "http://127.0.0.1:9/v1",
}


@pytest.fixture
def suite() -> Suite:
    s = Suite.objects.create(name="s")
    Case.objects.create(suite=s, key="c1", input="What is 2+2?", expected="4")
    return s


def start_body(suite: Suite, seed) -> bytes:
    body = {
        "suite": str(suite.uuid),
        "name": "r",
        "target": {"kind": "simulated", "seed": 0},
        "graders": [{"key": "exact", "kind": "exact"}],
        "trials_per_case": 1,
    }
    # json.dumps cannot write a 4,301-digit int either: put the digits in by hand
    return json.dumps(body).replace('"seed": 0', f'"seed": {seed}').encode()


def test_it_refuses_a_long_suite_description_from_config():
    long = "x" * (bounds.TEXT_MAX_CHARS["suite.description"] + 1)
    with pytest.raises(DomainError) as caught:
        config_apply(document={"suites": {"s": {"description": long, "cases": []}}})
    assert caught.value.field == "suites.s.description"
    assert caught.value.message == "20,001 characters; at most 20,000"
    assert not Suite.objects.exists()


def test_it_refuses_judge_params_with_too_many_keys_or_too_much_text():
    many = {f"k{i}": 1 for i in range(300_000)}
    with pytest.raises(DomainError) as caught:
        config_apply(document={"judges": [{**JUDGE, "params": many}]})
    assert (caught.value.field, caught.value.code) == ("judges[0].params", "too_large")
    assert caught.value.message == "300,000 keys; at most 100"
    big = {"criteria": "x" * bounds.TEXT_MAX_CHARS["judge.params"]}
    with pytest.raises(DomainError) as caught:
        config_apply(document={"judges": [{**JUDGE, "params": big}]})
    assert caught.value.field == "judges[0].params"
    assert not JudgeVersion.objects.exists()


def test_it_refuses_a_long_prompt_template_from_config_and_from_the_judge_form(client, carol):
    template = "Judge $output. " + "x" * bounds.TEXT_MAX_CHARS["prompt_template"]
    with pytest.raises(DomainError) as caught:
        config_apply(document={"judges": [{**JUDGE, "prompt_template": template}]})
    assert caught.value.field == "judges[0].prompt_template"
    client.force_login(carol)
    response = client.post(reverse("judges:version-new"), judge_form(template))
    assert response.status_code == 200
    assert response.context["form"].errors["prompt_template"]
    assert not JudgeVersion.objects.exists()


def test_apply_config_names_the_line_of_a_deeply_nested_toml_file(tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text('[judges.params]\ncriteria = "x"\nnested = ' + "[" * 2000 + "]" * 2000)
    with pytest.raises(CommandError) as caught:
        call_command("apply_config", str(path))
    assert str(caught.value) == f"{path}: line 3: {bounds_nested()}"


def test_apply_config_names_the_path_of_dotted_keys_nested_too_deeply(tmp_path):
    path = tmp_path / "dotted.toml"
    path.write_text("[targets.prod]\nsettings" + ".a" * 40 + " = [" + "[" * 30 + "]" * 31 + "\n")
    with pytest.raises(CommandError) as caught:
        call_command("apply_config", str(path))
    assert str(caught.value) == f"targets.prod.settings.a.a.a.a.a...: {bounds_nested()}"


def test_apply_config_names_the_line_of_a_dotted_key_of_5000_parts_before_parsing(tmp_path):
    path = tmp_path / "dotted.toml"
    path.write_text("[targets.prod]\nsettings" + ".a" * 5000 + " = 1\n")
    with pytest.raises(CommandError) as caught:
        call_command("apply_config", str(path))
    assert str(caught.value) == f"{path}: line 2: {bounds_nested()}"


def test_apply_config_refuses_a_huge_number_in_plain_words(tmp_path):
    path = tmp_path / "big.toml"
    path.write_text("[suites.s]\ndescription = 1" + "0" * 5000 + "\n")
    with pytest.raises(CommandError) as caught:
        call_command("apply_config", str(path))
    assert "a number with more than 4300 digits is refused" in str(caught.value)
    assert ADVICE not in str(caught.value)


def bounds_nested() -> str:
    return "nested too deeply (more than 64 arrays/tables inside each other)"


@pytest.mark.parametrize("seed", [2**63, 2**70, -1, 10**4000])
def test_run_start_refuses_a_seed_outside_0_to_2_63_without_echoing_it(carol, suite, seed):
    response = client_for(carol).post(
        "/api/runs/start", start_body(suite, seed), content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["field"] == "target.seed"
    assert (
        "expected a whole number from 0 to 9,223,372,036,854,775,807" in response.json()["detail"]
    )
    assert len(response.content) < 500  # never the 4,000 digits
    assert not Run.objects.exists()


def test_run_start_takes_the_largest_seed(carol, suite):
    response = client_for(carol).post(
        "/api/runs/start", start_body(suite, bounds.SEED_MAX), content_type="application/json"
    )
    assert response.status_code == 201
    assert Run.objects.get().target["seed"] == bounds.SEED_MAX


def test_a_json_number_of_5000_digits_is_refused_in_plain_words(carol, suite):
    response = client_for(carol).post(
        "/api/runs/start", start_body(suite, "1" * 5000), content_type="application/json"
    )
    assert response.status_code == 400
    assert "a number with more than 4300 digits is refused" in response.json()["detail"]
    assert ADVICE not in response.content.decode()


def test_the_run_form_takes_seeds_from_0_to_2_63(suite):
    def errors(seed) -> list:
        form = RunStartForm(data={"seed": str(seed)})
        form.is_valid()
        return form.errors.get("seed", [])

    assert errors(bounds.SEED_MAX) == []
    assert errors(0) == []
    assert errors(bounds.SEED_MAX + 1)
    assert errors(-1)


@pytest.mark.parametrize("seed", [str(2**63), "-1", "9" * 5000])
def test_run_suite_refuses_a_seed_outside_0_to_2_63(suite, seed, tmp_path):
    graders = tmp_path / "graders.json"
    graders.write_text('[{"key": "exact", "kind": "exact"}]')
    with pytest.raises(CommandError) as caught:
        call_command("run_suite", "s", "--simulated", "--seed", seed, "--graders", str(graders))
    assert "expected a whole number from 0 to 9,223,372,036,854,775,807" in str(caught.value)
    assert ADVICE not in str(caught.value)


def test_a_page_number_or_page_size_of_5000_digits_is_answered_without_python_advice(
    client, bob, carol
):
    client.force_login(carol)
    response = client.get(reverse("evals:run-list"), {"page": "9" * 5000})
    assert response.status_code == 400
    assert ADVICE not in response.content.decode()
    response = client_for(bob).get("/api/runs/", {"page_size": "9" * 5000})
    assert response.status_code == 200  # capped at 100, as any large size


def test_apply_config_refuses_a_file_over_1_mib_before_parsing_it(tmp_path):
    path = tmp_path / "big.toml"
    path.write_text('[suites.s]\ndescription = "' + "x" * (2 * bounds.MIB) + '"\n')
    with pytest.raises(CommandError) as caught:
        call_command("apply_config", str(path))
    assert "over the limit of 1,048,576 bytes for a config file" in str(caught.value)
    assert not Suite.objects.exists()


def test_the_judge_form_refuses_many_params_keys_before_parsing_them(client, carol):
    client.force_login(carol)
    form = judge_form("Judge $output.")
    form["params_json"] = json.dumps({f"k{i}": 1 for i in range(50_000)})  # 0.7 MB
    response = client.post(reverse("judges:version-new"), form)
    assert response.status_code == 200
    assert "at most 400000 characters" in response.context["form"].errors["params_json"][0]
    form["params_json"] = json.dumps({f"k{i}": 1 for i in range(300_000)})  # 4 MB posted
    response = client.post(reverse("judges:version-new"), form)
    assert response.status_code == 400  # over DATA_UPLOAD_MAX_MEMORY_SIZE: never parsed
    assert not JudgeVersion.objects.exists()


def test_a_form_post_over_its_limit_gets_a_page_saying_so(rf, carol):
    request = rf.post("/judge-versions/new/")
    request.user = carol
    response = bad_request(request, RequestDataTooBig())
    assert response.status_code == 400
    assert "larger than 1,048,576 bytes, the limit of a form" in response.content.decode()
    assert "remove the character" not in response.content.decode()


def test_config_refuses_a_target_preset_seed_past_2_63():
    target = {"kind": "simulated", "model": "simulated", "seed": 2**70}
    with pytest.raises(DomainError) as caught:
        config_apply(document={"targets": {"t": target}})
    assert caught.value.field == "targets.t.seed"


def test_the_judge_form_names_the_field_of_params_nested_10000_deep(client, carol):
    client.force_login(carol)
    form = judge_form("Judge $output.")
    form["params_json"] = "[" * 10_000 + "]" * 10_000
    response = client.post(reverse("judges:version-new"), form)
    assert response.status_code == 200
    assert response.context["form"].errors["params_json"] == [
        "params: invalid JSON at line 1, column 65: nested too deeply (more than 64 "
        "arrays/objects inside each other)"
    ]


def test_a_grid_of_the_last_4301_digit_runs_is_a_400_on_every_path(client, bob, suite):
    # int() of more than 4,300 digits raised Python's advice as a 500 (page, API, export).
    last = {"last": "9" * 4301}
    api = client_for(bob)
    for response in (
        api.get(f"/api/suites/{suite.uuid}/grid", last),
        api.get(f"/api/suites/{suite.uuid}/grid/export", last),
    ):
        assert response.status_code == 400
        assert ADVICE not in response.content.decode()
    client.force_login(bob)
    response = client.get(reverse("evals:suite-grid", kwargs={"suite_id": suite.uuid}), last)
    assert response.status_code == 400 and ADVICE not in response.content.decode()


def test_a_content_length_of_5000_digits_is_answered_without_python_advice(carol):
    api = client_for(carol)
    huge = {"CONTENT_LENGTH": "9" * 5000}
    ingest = api.generic(
        "POST", "/api/ingest", b'{"x": 1}\n', content_type="application/x-ndjson", **huge
    )
    assert ingest.status_code == 413 and ADVICE not in ingest.content.decode()
    imports = api.generic(
        "POST", "/api/imports", b"--x--", content_type="multipart/form-data; boundary=x", **huge
    )
    assert imports.status_code == 413 and ADVICE not in imports.content.decode()


@pytest.mark.parametrize("debug", [True, False])
def test_a_form_post_over_its_limit_gets_the_page_with_csrf_checks_in_every_mode(carol, debug):
    # CSRF reads the form before any view: the error was Django's technical page in DEBUG.
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(carol)
    with override_settings(DEBUG=debug):
        response = browser.post(
            "/judge-versions/new/", {"prompt_template": "x" * (2 * 1024 * 1024)}
        )
    assert response.status_code == 400
    text = response.content.decode()
    assert "the limit of a form" in text and "Traceback" not in text
