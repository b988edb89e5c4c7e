"""Numbers from outside have documented bounds (``core.bounds``, issue 13): ``latency_ms:
1e308`` and a token count past the integer column are refused with the record and field
named, on every way in (CSV/JSONL import, ingest, run files, promptfoo, Inspect, the gate's
embedded files, API bodies, forms) — never stored, never a server error."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from core.bounds import INT_MAX, LATENCY_MS_MAX
from core.errors import DomainError
from evals.models import Run, Trial
from interop.run_file import run_export
from tests.core.test_api_core import client_for
from tests.import_helpers import import_bytes
from tests.interop.test_import_inspect import _bytes as inspect_bytes
from tests.interop.test_import_inspect import _doc as inspect_doc
from tests.interop.test_import_promptfoo import _bytes as promptfoo_bytes
from tests.interop.test_import_promptfoo import _doc as promptfoo_doc
from tests.labeling_builders import calibration_set, judged_run
from tests.report_builders import add_trial, make_run

pytestmark = pytest.mark.django_db
GRADERS = [{"key": "exact", "kind": "exact", "config": {}, "gating": True}]


@pytest.mark.parametrize("latency", ["1e308", "86400000.5", "-1"])
def test_a_csv_latency_out_of_bounds_is_refused_naming_row_and_field(latency):
    body = f"case_id,input,output,latency_ms\r\nc1,q,a,5\r\nc2,q,a,{latency}\r\n".encode()
    with pytest.raises(DomainError) as caught:
        import_bytes(body, filename="r.csv", suite="S", run="r")
    assert caught.value.field == "latency_ms"
    assert str(caught.value).startswith("row 2 (line 3): field latency_ms: expected")
    assert not Run.objects.exists()


def test_the_largest_latency_is_accepted():
    body = f"case_id,input,output,latency_ms\r\nc1,q,a,{LATENCY_MS_MAX}\r\n".encode()
    import_bytes(body, filename="r.csv", suite="S", run="r")
    assert Trial.objects.get().latency_ms == LATENCY_MS_MAX


def test_ingest_refuses_latency_1e308_naming_record_and_field(carol):
    body = {
        "suite": "S",
        "run": "r",
        "trials": [
            {"case_id": "c1", "input": "q", "output": "a", "latency_ms": 5},
            {"case_id": "c2", "input": "q", "output": "a", "latency_ms": 1e308},
        ],
    }
    response = client_for(carol).post(
        "/api/ingest", data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 400, response.content
    data = response.json()
    assert (data["record"], data["field"]) == (1, "latency_ms")
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("key", "value"),
    [("latency_ms", 1e308), ("input_tokens", INT_MAX + 1), ("attempt", 2**40), ("cost_usd", "1e9")],
)
def test_import_run_refuses_a_number_out_of_bounds_naming_the_field(tmp_path, key, value):
    run = make_run(cases=[("c1", [])], graders=GRADERS, suite="S", name="R")
    add_trial(run, "c1", 1, grades={"exact": True}, latency=5.0, tokens=(1, 1), cost="0.1")
    data = run_export(run=run)
    data["cases"][0]["trials"][0][key] = value
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CommandError, match=rf"cases\[0\]\.trials\[0\]\.{key}"):
        call_command("import_run", str(path), "--name", "copy")
    assert not Run.objects.filter(name="copy").exists()


def test_promptfoo_and_inspect_latencies_past_a_day_are_refused():
    doc = promptfoo_doc()
    doc["results"]["results"][0]["latencyMs"] = 1e308
    with pytest.raises(DomainError, match=r"results\.results\[0\]\.latencyMs: expected milli"):
        import_bytes(promptfoo_bytes(doc), filename="results.json", suite="pf", run="r")
    doc = promptfoo_doc()
    doc["results"]["results"][0]["response"]["tokenUsage"]["prompt"] = INT_MAX + 1
    with pytest.raises(DomainError, match=r"tokenUsage\.prompt: expected a whole number"):
        import_bytes(promptfoo_bytes(doc), filename="results.json", suite="pf", run="r")
    doc = inspect_doc()
    doc["samples"][1]["total_time"] = 86_401  # seconds: just over a day
    with pytest.raises(DomainError, match=r"samples\[1\]\.total_time: expected milli"):
        import_bytes(inspect_bytes(doc), filename="log.json", suite="in", run="r")
    assert not Run.objects.exists()


def test_the_gate_refuses_an_embedded_file_with_latency_1e308(carol):
    run = make_run(cases=[("c1", [])], graders=GRADERS, suite="S", name="B")
    add_trial(run, "c1", 1, grades={"exact": True}, latency=5.0)
    head = make_run(cases=[("c1", [])], graders=GRADERS, suite="S", name="H")
    add_trial(head, "c1", 1, grades={"exact": True}, latency=5.0)
    document = run_export(run=run)
    document["cases"][0]["trials"][0]["latency_ms"] = 1e308
    response = client_for(carol).post(
        "/api/gate", {"base_file": document, "head": str(head.uuid)}, format="json"
    )
    assert response.status_code == 400
    (message,) = response.json()["base_file"]
    assert message.startswith("base_file.cases[0].trials[0].latency_ms: ")


def test_api_integers_are_bounded_by_the_database_integer(carol, bob):
    run, version, trials = judged_run(2)
    response = client_for(carol).post(
        "/api/judge-runs",
        {"run": str(run.uuid), "judge_version": str(version.uuid), "sample": 1, "seed": 2**63},
        format="json",
    )
    assert response.status_code == 400 and list(response.json()) == ["seed"]
    response = client_for(bob).post(
        "/api/labels",
        {"trial": str(trials[0].uuid), "verdict": "pass", "expected_version": 2**63},
        format="json",
    )
    assert response.status_code == 400 and list(response.json()) == ["expected_version"]


def test_a_form_seed_past_2_63_is_a_form_error(client, carol):
    run, version, trials = judged_run(4)
    calibration_set(run, version, trials)
    client.force_login(carol)
    response = client.post(
        reverse("labeling:set-new"),
        {"name": "big", "run": str(run.uuid), "size": 2, "seed": 2**63},
    )
    assert response.status_code in (200, 400)
    assert "less than or equal to 9223372036854775807" in response.content.decode()
