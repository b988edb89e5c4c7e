"""``POST /api/gate``: the same JSON as ``manage.py gate --json``, strict input, every role."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from evals.baselines import baseline_set
from evals.models import Suite
from interop.run_file import run_export
from tests.comparison_builders import db_run, judge_version
from tests.core.test_api_core import client_for

pytestmark = pytest.mark.django_db

STEADY = {f"c{i}": "PPPF" for i in range(6)}


def gate_cli(*args: str, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        call_command("gate", *args)
    return exit_info.value.code, capsys.readouterr().out


def post(user, body, **extra):
    return client_for(user).post("/api/gate", body, format="json", **extra)


@pytest.fixture
def runs():
    v = judge_version(1)
    base = db_run(STEADY, name="B", version=v)
    head = db_run({**STEADY, "c0": "FFFF", "c1": "FFFF", "c2": "FFFF"}, name="H", version=v)
    return base, head


def test_it_lets_every_role_that_sees_the_comparison_page_gate(alice, bob, carol, mallory, runs):
    base, head = runs
    body = {"base": str(base.uuid), "head": str(head.uuid)}
    for user in (alice, bob, carol):
        assert post(user, body).status_code == 200
    assert post(mallory, body).status_code == 403
    assert APIClient().post("/api/gate", body, format="json").status_code == 401


@pytest.mark.parametrize("scenario", ["pass", "regression", "errored", "judge_changed"])
def test_it_answers_exactly_what_the_command_prints(scenario, carol, capsys):
    v1 = judge_version(1)
    head_version = judge_version(2) if scenario == "judge_changed" else v1
    head_cases = {
        "pass": STEADY,
        "judge_changed": STEADY,
        "regression": {f"c{i}": "FFFF" for i in range(6)},
        "errored": {**STEADY, "c0": "EPPF"},
    }[scenario]
    base = db_run(STEADY, name="B", version=v1)
    head = db_run(head_cases, name="H", version=head_version)
    code, out = gate_cli(
        "--base", str(base.uuid), "--head", str(head.uuid), "--json", capsys=capsys
    )
    response = post(carol, {"base": str(base.uuid), "head": str(head.uuid)})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.content.decode() + "\n" == out  # the same bytes
    data = json.loads(response.content, parse_constant=pytest.fail)
    assert (
        data["decision"]["exit_code"]
        == code
        == {"pass": 0, "regression": 1, "errored": 2, "judge_changed": 2}[scenario]
    )


def test_it_passes_the_policy_flags_like_the_command(carol, capsys):
    base = db_run(STEADY, name="B", version=judge_version(1))
    head = db_run(STEADY, name="H", version=judge_version(2))
    _, out = gate_cli(
        "--base",
        "S/B",
        "--head",
        "S/H",
        "--json",
        "--allow-incomparable",
        "--alpha",
        "0.1",
        "--max-errored-fraction",
        "0.5",
        "--allow-untrusted",
        capsys=capsys,
    )
    response = post(
        carol,
        {
            "base": str(base.uuid),
            "head": str(head.uuid),
            "allow_incomparable": True,
            "alpha": 0.1,
            "max_errored_fraction": 0.5,
            "allow_untrusted": True,
        },
    )
    assert response.content.decode() + "\n" == out
    assert json.loads(out)["decision"]["exit_code"] == 0


def test_it_uses_the_suite_baseline_when_no_base_is_given(carol, capsys, runs):
    base, head = runs
    response = post(carol, {"head": str(head.uuid)})
    assert response.status_code == 400
    assert response.json() == {"base": ["suite 'S' has no baseline: give --base"]}
    baseline_set(suite=Suite.objects.get(name="S"), run=base, by=carol)
    _, out = gate_cli("--head", "S/H", "--json", capsys=capsys)
    response = post(carol, {"head": str(head.uuid)})
    assert response.status_code == 200 and response.content.decode() + "\n" == out
    assert response.json()["decision"]["exit_code"] == 1


def test_it_gates_against_an_embedded_baseline_file(carol, capsys, tmp_path, runs):
    base, head = runs
    path = tmp_path / "baseline.json"
    call_command("export_run", "S/B", "--out", str(path))
    capsys.readouterr()
    _, out = gate_cli("--base", str(path), "--head", "S/H", "--json", capsys=capsys)
    document = json.loads(path.read_text())
    response = post(carol, {"base_file": document, "head": str(head.uuid)})
    assert response.status_code == 200
    from_api, from_cli = response.json(), json.loads(out)
    assert from_api["comparison"]["base"].pop("source") == "base_file"
    assert from_cli["comparison"]["base"].pop("source") == str(path)
    assert from_api == from_cli
    assert from_api["decision"]["exit_code"] == 1


def test_a_head_file_needs_a_base(carol, runs):
    base, _ = runs
    response = post(carol, {"head_file": run_export(run=base)})
    assert response.status_code == 400
    assert "base" in response.json()


@pytest.mark.parametrize(
    ("place", "value", "field"),
    [
        (
            ("cases", 0, "trials", 0, "grades", 0, "passed"),
            "false",
            "base_file.cases[0].trials[0].grades[0].passed",
        ),
        (
            ("cases", 0, "trials", 0, "grades", 0, "gating"),
            1,
            "base_file.cases[0].trials[0].grades[0].gating",
        ),
        (("cases", 0, "trials", 0, "status"), "fine", "base_file.cases[0].trials[0].status"),
        (("cases", 0, "trials", 0, "cost_usd"), "a lot", "base_file.cases[0].trials[0].cost_usd"),
        (("cases", 0, "key"), 7, "base_file.cases[0].key"),
        (("run", "trials_per_case"), 10_000, "base_file.run.trials_per_case"),
        (("format",), "assay-run-data", "base_file.format"),
    ],
)
def test_it_refuses_a_malformed_embedded_file_naming_the_place(place, value, field, carol, runs):
    base, head = runs
    document = run_export(run=base)
    target = document
    for step in place[:-1]:
        target = target[step]
    target[place[-1]] = value
    response = post(carol, {"base_file": document, "head": str(head.uuid)})
    assert response.status_code == 400
    (message,) = response.json()["base_file"]
    assert message.startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"alpha": "0.05"}, "alpha"),
        ({"alpha": 1}, "alpha"),
        ({"alpha": 0}, "alpha"),
        ({"alpha": True}, "alpha"),
        ({"alpha": None}, "alpha"),
        ({"max_errored_fraction": 1.5}, "max_errored_fraction"),
        ({"max_errored_fraction": "0"}, "max_errored_fraction"),
        ({"allow_untrusted": "false"}, "allow_untrusted"),
        ({"allow_untrusted": 0}, "allow_untrusted"),
        ({"allow_incomparable": "true"}, "allow_incomparable"),
        ({"alfa": 0.1}, "alfa"),
        ({"head": None}, "head"),
        ({"head": 12345}, "head"),
        ({"head": "not-a-uuid"}, "head"),
        ({"base": "not-a-uuid"}, "base"),
    ],
)
def test_it_refuses_bad_input_with_a_400_naming_the_field(body, field, carol, runs):
    base, head = runs
    response = post(carol, {"base": str(base.uuid), "head": str(head.uuid), **body})
    assert response.status_code == 400
    assert field in response.json()


def test_it_refuses_a_missing_head_and_two_heads(carol, runs):
    base, head = runs
    assert "head" in post(carol, {"base": str(base.uuid)}).json()
    response = post(
        carol, {"head": str(head.uuid), "head_file": run_export(run=head), "base": str(base.uuid)}
    )
    assert response.status_code == 400 and "head" in response.json()


def test_it_refuses_non_finite_numbers_and_form_bodies(carol, runs):
    base, head = runs
    client = client_for(carol)
    raw = f'{{"base": "{base.uuid}", "head": "{head.uuid}", "alpha": NaN}}'
    response = client.post("/api/gate", raw, content_type="application/json")
    assert response.status_code == 400
    response = client.post("/api/gate", {"base": str(base.uuid), "head": str(head.uuid)})
    assert response.status_code == 415  # multipart: every value would be a string


def test_it_answers_404_for_an_unknown_run(carol, runs):
    base, _ = runs
    response = post(carol, {"base": str(base.uuid), "head": "00000000-0000-4000-8000-000000000000"})
    assert response.status_code == 404


def test_it_gates_an_embedded_head_file_against_a_run(carol, capsys, tmp_path, runs):
    base, head = runs
    path = tmp_path / "head.json"
    call_command("export_run", "S/H", "--out", str(path))
    capsys.readouterr()
    _, out = gate_cli("--base", "S/B", "--head", str(path), "--json", capsys=capsys)
    response = post(carol, {"head_file": json.loads(path.read_text()), "base": str(base.uuid)})
    assert response.status_code == 200
    from_api, from_cli = response.json(), json.loads(out)
    assert from_api["comparison"]["head"].pop("source") == "head_file"
    assert from_cli["comparison"]["head"].pop("source") == str(path)
    assert from_api == from_cli and from_api["decision"]["exit_code"] == 1
