"""``GET /api/comparisons/`` and the downloads over the API: a run (CSV, Parquet, the JSON
baseline file), its labels, a comparison; every role; bad parameters named."""

from __future__ import annotations

import csv
import io
import json

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from evals.comparison.selectors import comparison_get
from evals.models import Run
from labeling.models import Label
from tests.comparison_builders import db_run, judge_version
from tests.core.test_api_core import client_for

pytestmark = pytest.mark.django_db

STEADY = {f"c{i}": "PPPF" for i in range(6)}
UNKNOWN = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
def runs():
    v = judge_version(1)
    base = db_run(STEADY, name="B", version=v)
    head = db_run({**STEADY, "c0": "FFFF", "c1": "FFFF", "c2": "FFFF"}, name="H", version=v)
    return base, head


def comparison_url(base, head, **params) -> str:
    query = "&".join(
        f"{k}={v}" for k, v in {"base": base.uuid, "head": head.uuid, **params}.items()
    )
    return f"/api/comparisons/?{query}"


# ---- GET /api/comparisons/ ------------------------------------------------------------


def test_it_shows_comparisons_to_every_viewer_role(alice, bob, carol, mallory, runs):
    url = comparison_url(*runs)
    for user in (alice, bob, carol):
        assert client_for(user).get(url).status_code == 200
    assert client_for(mallory).get(url).status_code == 403
    assert APIClient().get(url).status_code == 401


def test_it_agrees_with_the_gate_command_and_the_page_selector(bob, runs, capsys):
    base, head = runs
    with pytest.raises(SystemExit):
        call_command("gate", "--base", str(base.uuid), "--head", str(head.uuid), "--json")
    from_cli = json.loads(capsys.readouterr().out)
    response = client_for(bob).get(comparison_url(base, head))
    data = json.loads(response.content, parse_constant=pytest.fail)
    assert data == from_cli
    h = data["comparison"]["headline"]
    assert (h["base_rate"], h["head_rate"], h["n_cases"]) == (0.75, 0.375, 6)
    assert h["p_text"] and isinstance(h["p_value"], float)
    assert {"bootstrap_low", "bootstrap_high", "clustered"} <= set(h)
    assert data["comparison"]["class_counts"]["broken"] == 0
    assert data["comparison"]["class_counts"]["worse"] == 3
    assert [c["key"] for c in data["comparison"]["cases"]] == [f"c{i}" for i in range(6)]
    assert data["comparison"]["detectable"] is not None
    assert data["decision"]["exit_code"] == 1
    page = comparison_get(base=base, head=head).to_dict()
    assert data["comparison"]["cases"] == json.loads(json.dumps(page["cases"]))


def test_it_reports_comparability_problems(bob):
    base = db_run(STEADY, name="B", version=judge_version(1))
    head = db_run(STEADY, name="H", version=judge_version(2))
    data = client_for(bob).get(comparison_url(base, head)).json()
    assert data["comparison"]["problems"] == [
        "judge version changed (judge-v1 → judge-v2): the runs are not comparable"
    ]
    assert data["comparison"]["comparable"] is False
    assert data["decision"]["exit_code"] == 2


def test_it_uses_the_alpha_asked_for(bob, runs):
    data = client_for(bob).get(comparison_url(*runs, alpha="0.1")).json()
    assert data["comparison"]["alpha"] == 0.1
    assert data["comparison"]["headline"]["confidence"] == pytest.approx(0.9)


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("head={head}", "base"),
        ("base={base}", "head"),
        ("base=nope&head={head}", "base"),
        ("base={base}&head={head}&alpha=abc", "alpha"),
        ("base={base}&head={head}&alpha=nan", "alpha"),
        ("base={base}&head={head}&alpha=1", "alpha"),
        ("base={base}&head={head}&alpha=0", "alpha"),
        ("base={base}&head={head}&alpha=1e-2", "alpha"),
        ("base={base}&head={head}&alpha=-0.1", "alpha"),
    ],
)
def test_it_names_a_missing_or_bad_parameter(query, param, bob, runs):
    base, head = runs
    response = client_for(bob).get(
        "/api/comparisons/?" + query.format(base=base.uuid, head=head.uuid)
    )
    assert response.status_code == 400
    assert param in response.json()


def test_it_answers_404_for_an_unknown_run(bob, runs):
    base, _ = runs
    response = client_for(bob).get(f"/api/comparisons/?base={base.uuid}&head={UNKNOWN}")
    assert response.status_code == 404


# ---- GET /api/runs/<uuid>/export ------------------------------------------------------


def test_it_lets_every_viewer_role_download_a_run(alice, bob, carol, mallory, runs):
    _, head = runs
    for fmt in ("csv", "parquet", "json"):
        url = f"/api/runs/{head.uuid}/export?format={fmt}"
        for user in (alice, bob, carol):
            assert client_for(user).get(url).status_code == 200
        assert client_for(mallory).get(url).status_code == 403
        assert APIClient().get(url).status_code == 401


def test_it_downloads_a_run_as_csv_and_parquet(bob, runs):
    _, head = runs
    client = client_for(bob)
    response = client.get(
        f"/api/runs/{head.uuid}/export?format=csv&tz=Asia/Shanghai", HTTP_ACCEPT="text/csv"
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="run-{head.uuid}.csv"'
    rows = list(csv.DictReader(io.StringIO(response.content.decode(), newline="")))
    assert len(rows) == 24 and rows[0]["case_id"] == "c0"
    assert rows[0]["created_at"].endswith("+08:00")
    response = client.get(f"/api/runs/{head.uuid}/export?format=parquet")
    assert response["Content-Type"] == "application/vnd.apache.parquet"
    assert response["Content-Disposition"] == f'attachment; filename="run-{head.uuid}.parquet"'
    table = pq.read_table(io.BytesIO(response.content))
    assert table.num_rows == 24 and "judge.passed" in table.column_names


def test_the_json_download_is_the_export_run_file_byte_for_byte(bob, runs, tmp_path):
    _, head = runs
    path = tmp_path / "run.json"
    call_command("export_run", str(head.uuid), "--out", str(path), stdout=io.StringIO())
    response = client_for(bob).get(f"/api/runs/{head.uuid}/export?format=json")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="run-{head.uuid}.json"'
    assert response.content == path.read_bytes()
    call_command(
        "export_run", str(head.uuid), "--out", str(path), "--no-outputs", stdout=io.StringIO()
    )
    response = client_for(bob).get(f"/api/runs/{head.uuid}/export?format=json&outputs=false")
    assert response.content == path.read_bytes()


def test_it_refuses_a_json_download_of_an_unfinished_run(bob, runs):
    _, head = runs
    Run.objects.filter(id=head.id).update(status=Run.Status.RUNNING)
    response = client_for(bob).get(f"/api/runs/{head.uuid}/export?format=json")
    assert response.status_code == 409
    assert "export a finished run" in response.json()["detail"]


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("format=xlsx", "format"),
        ("format=", "format"),
        ("format=CSV", "format"),
        ("format=csv&tz=Mars/Olympus", "tz"),
        ("format=json&outputs=no", "outputs"),
    ],
)
def test_it_names_a_bad_download_option(query, param, bob, runs):
    _, head = runs
    response = client_for(bob).get(f"/api/runs/{head.uuid}/export?{query}")
    assert response.status_code == 400
    assert param in response.json()


def test_it_answers_404_for_an_unknown_run_download_and_403_to_outsiders_first(bob, mallory):
    for run_id in (UNKNOWN, "null", "0.5"):
        for kind in ("export", "labels-export"):
            assert client_for(bob).get(f"/api/runs/{run_id}/{kind}").status_code == 404
            assert client_for(mallory).get(f"/api/runs/{run_id}/{kind}").status_code == 403


# ---- GET /api/runs/<uuid>/labels-export -----------------------------------------------


def test_it_downloads_a_runs_labels_for_every_viewer_role(alice, bob, carol, mallory, runs):
    _, head = runs
    trial = head.trials.order_by("id").first()
    Label.objects.create(trial=trial, reviewer=bob, verdict="fail", critique='too "long", ok')
    url = f"/api/runs/{head.uuid}/labels-export?format=csv"
    for user in (alice, bob, carol):
        response = client_for(user).get(url)
        assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="labels-{head.uuid}.csv"'
    rows = list(csv.DictReader(io.StringIO(response.content.decode(), newline="")))
    assert [(r["trial"], r["reviewer"], r["verdict"], r["critique"]) for r in rows] == [
        (str(trial.uuid), "bob", "fail", 'too "long", ok')
    ]
    assert client_for(mallory).get(url).status_code == 403
    assert APIClient().get(url).status_code == 401
    assert (
        client_for(bob).get(f"/api/runs/{head.uuid}/labels-export?format=json").status_code == 400
    )


# ---- GET /api/comparisons/export ------------------------------------------------------


def test_it_downloads_a_comparison_for_every_viewer_role(alice, bob, carol, mallory, runs):
    base, head = runs
    url = f"/api/comparisons/export?base={base.uuid}&head={head.uuid}&format=csv"
    for user in (alice, bob, carol):
        response = client_for(user).get(url)
        assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert (
        response["Content-Disposition"]
        == f'attachment; filename="comparison-{base.uuid}-{head.uuid}.csv"'
    )
    rows = list(csv.DictReader(io.StringIO(response.content.decode(), newline="")))
    assert [(r["case_id"], r["change"]) for r in rows[:4]] == [
        ("c0", "worse"),
        ("c1", "worse"),
        ("c2", "worse"),
        ("c3", "flaky"),
    ]
    assert client_for(mallory).get(url).status_code == 403
    assert APIClient().get(url).status_code == 401
    parquet = client_for(bob).get(url.replace("format=csv", "format=parquet"))
    assert pq.read_table(io.BytesIO(parquet.content)).num_rows == 6


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("head={head}", "base"),
        ("base={base}&head=x", "head"),
        ("base={base}&head={head}&format=json", "format"),
    ],
)
def test_it_names_a_bad_comparison_download_option(query, param, bob, runs):
    base, head = runs
    response = client_for(bob).get(
        "/api/comparisons/export?" + query.format(base=base.uuid, head=head.uuid)
    )
    assert response.status_code == 400
    assert param in response.json()
