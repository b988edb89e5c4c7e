"""Exports of a run, its labels and a comparison as CSV and Parquet (issue 6; faults J2, M1)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal

import pandas as pd
import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from core.errors import DomainError
from evals.models import Case, Run, Trial
from interop import exports
from labeling.models import Label
from tests.import_helpers import import_bytes
from tests.report_builders import add_trial, make_run

SHANGHAI_TIME = datetime(2025, 2, 24, 15, 30, tzinfo=UTC)
GRADERS = [{"key": "exact", "kind": "exact_match", "config": {}, "gating": True}]
J2 = (
    b'case_id,input,expected\r\nc1,"line 1\r\nand line 2\nline 3",'
    b'"He said ""hi"", then left"\r\nc2,plain,"a,b"\r\n'
)


def _run(n_cases: int = 2) -> Run:
    run = make_run(cases=[(f"k{i}", ["t1", "t2"]) for i in range(n_cases)], graders=GRADERS)
    for i in range(n_cases):
        add_trial(
            run,
            f"k{i}",
            1,
            grades={"exact": (True, 1.0, "same")},
            cost="0.00120000",
            tokens=(10, 3),
            latency=12.5,
        )
    Trial.objects.filter(run=run).update(created_at=SHANGHAI_TIME)
    return run


def _csv_dicts(body: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(body.decode("utf-8"), newline="")))


@pytest.mark.django_db
def test_it_exports_one_csv_row_per_trial_with_exact_values_in_the_viewer_zone():
    run = _run(1)
    add_trial(run, "k0", 2, status="error", error="timeout after 30000 ms")
    table = exports.run_table(run=run, zone=exports.zone_get(name="Asia/Shanghai"))
    rows = _csv_dicts(exports.table_csv(table))
    assert [(r["case_id"], r["attempt"], r["status"]) for r in rows] == [
        ("k0", "1", "ok"),
        ("k0", "2", "error"),
    ]
    first, errored = rows
    assert first["suite"] == "S" and first["run"] == "R1"
    assert first["content_hash"] == Case.objects.get(key="k0").content_hash
    assert first["tags"] == "t1,t2"
    assert first["created_at"] == "2025-02-24T23:30:00+08:00"
    assert (first["latency_ms"], first["input_tokens"], first["output_tokens"]) == (
        "12.5",
        "10",
        "3",
    )
    assert first["cost_usd"] == "0.001200000000"  # the column's 12 decimals (core.bounds)
    assert (
        first["exact.passed"],
        first["exact.status"],
        first["exact.score"],
        first["exact.reason"],
    ) == ("true", "ok", "1.0", "same")
    assert errored["error"] == "timeout after 30000 ms"
    assert (errored["cost_usd"], errored["input_tokens"], errored["latency_ms"]) == ("", "", "")
    assert errored["exact.passed"] == "" and errored["exact.status"] == ""


@pytest.mark.django_db
def test_it_writes_rfc_4180_crlf_records_and_no_nan_for_unknown_numbers():
    run = _run(1)
    add_trial(run, "k0", 2)
    body = exports.table_csv(exports.run_table(run=run))
    assert body.count(b"\r\n") == 3
    assert b"nan" not in body.lower() and b"None" not in body


@pytest.mark.django_db
def test_it_round_trips_the_j2_cases_through_a_csv_export_and_import():
    import_bytes(J2, filename="j2.csv", suite="J2", run="first")
    first = Run.objects.get(name="first")
    body = exports.table_csv(exports.run_table(run=first))
    import_bytes(body, filename="export.csv", suite="J2 again", run="second")
    again = {c.key: c for c in Case.objects.filter(suite__name="J2 again")}
    assert again["c1"].input == "line 1\nand line 2\nline 3"
    assert again["c1"].expected == 'He said "hi", then left'
    assert again["c2"].input == "plain" and again["c2"].expected == "a,b"
    originals = {c.key: c for c in Case.objects.filter(suite__name="J2")}
    assert {k: c.content_hash for k, c in again.items()} == {
        k: c.content_hash for k, c in originals.items()
    }
    second = Run.objects.get(name="second")
    assert exports.run_table(run=second).rows[0][2:12] == exports.run_table(run=first).rows[0][2:12]


@pytest.mark.django_db
def test_tags_with_commas_brackets_and_spaces_survive_a_csv_round_trip():
    tags = ["billing, EU", "[beta]", " padded ", "plain"]
    run = make_run(cases=[("k1", tags), ("k2", ["a", "b"])], graders=GRADERS, suite="T")
    add_trial(run, "k1", 1, grades={"exact": True})
    add_trial(run, "k2", 1, grades={"exact": True})
    body = exports.table_csv(exports.run_table(run=run))
    cells = {row["case_id"]: row["tags"] for row in _csv_dicts(body)}
    assert cells == {"k1": '["billing, EU","[beta]"," padded ","plain"]', "k2": "a,b"}
    import_bytes(body, filename="export.csv", suite="T again", run="second")
    again = dict(Case.objects.filter(suite__name="T again").values_list("key", "tags"))
    assert again == {"k1": tags, "k2": ["a", "b"]}


def test_a_csv_tags_cell_that_starts_with_a_bracket_must_be_a_json_array(db):

    with pytest.raises(DomainError, match="tags: a cell starting with '\\[' must be"):
        import_bytes(b"case_id,input,tags\r\nc1,x,[oops\r\n", filename="t.csv", suite="S", run="r")
    with pytest.raises(DomainError, match="tags: expected an array of strings"):
        import_bytes(
            b'case_id,input,tags\r\nc1,x,"[1,2]"\r\n', filename="t.csv", suite="S", run="r"
        )
    assert not Case.objects.exists()


@pytest.mark.django_db
def test_it_writes_parquet_that_pandas_reads_back_with_null_cost_kept_null():
    run = _run(1)
    add_trial(run, "k0", 2, status="error", error="boom")
    frame = pd.read_parquet(io.BytesIO(exports.table_parquet(exports.run_table(run=run))))
    assert list(frame["case_id"]) == ["k0", "k0"]
    assert frame["cost_usd"].iloc[0] == Decimal("0.00120000")
    assert frame["cost_usd"].iloc[1] is None
    assert frame["input_tokens"].isna().tolist() == [False, True]
    assert frame["created_at"].iloc[0] == pd.Timestamp("2025-02-24T15:30:00Z")
    assert list(frame["tags"].iloc[0]) == ["t1", "t2"]
    assert frame["exact.passed"].iloc[0] == True  # noqa: E712 - numpy bool


@pytest.mark.django_db
def test_it_builds_a_run_export_in_a_query_count_independent_of_size():
    small, big = _run(2), None
    with CaptureQueriesContext(connection) as few:
        exports.run_table(run=small)
    big = make_run(cases=[(f"b{i}", []) for i in range(30)], graders=GRADERS, name="R2", suite="S2")
    for i in range(30):
        add_trial(big, f"b{i}", 1, grades={"exact": True})
    with CaptureQueriesContext(connection) as many:
        rows = exports.run_table(run=big).rows
    assert len(rows) == 30
    assert len(many.captured_queries) == len(few.captured_queries) == 2


@pytest.mark.django_db
def test_it_exports_labels_with_reviewer_verdict_critique_and_zoned_time(bob):
    run = _run(1)
    trial = Trial.objects.get(run=run)
    Label.objects.create(
        trial=trial,
        reviewer=bob,
        verdict="fail",
        critique='too "long", sorry',
        created_at=SHANGHAI_TIME,
    )
    rows = _csv_dicts(
        exports.table_csv(
            exports.labels_table(run=run, zone=exports.zone_get(name="Asia/Shanghai"))
        )
    )
    assert rows == [
        {
            "trial": str(trial.uuid),
            "case_id": "k0",
            "attempt": "1",
            "reviewer": "bob",
            "verdict": "fail",
            "critique": 'too "long", sorry',
            "source": "reviewer",
            "created_at": "2025-02-24T23:30:00+08:00",
        }
    ]


@pytest.mark.django_db
def test_it_exports_a_comparison_with_counts_rates_and_added_cases():
    base = make_run(cases=[("a", []), ("b", [])], graders=GRADERS, name="base")
    add_trial(base, "a", 1, grades={"exact": True})
    add_trial(base, "a", 2, grades={"exact": True})
    add_trial(base, "b", 1, grades={"exact": True})
    add_trial(base, "b", 2, grades={"exact": True})
    head = make_run(cases=[("a", []), ("b", [])], graders=GRADERS, name="head")
    add_trial(head, "a", 1, grades={"exact": True})
    add_trial(head, "a", 2, grades={"exact": False})
    add_trial(head, "b", 1, grades={"exact": True})
    add_trial(head, "b", 2, grades={"exact": True})
    rows = _csv_dicts(exports.table_csv(exports.comparison_table(base=base, head=head)))
    a = next(r for r in rows if r["case_id"] == "a")
    assert (
        a["section"],
        a["base_passed"],
        a["base_graded"],
        a["head_passed"],
        a["head_graded"],
    ) == ("shared", "2", "2", "1", "2")
    assert (a["base_rate"], a["head_rate"], a["delta"]) == ("1.0", "0.5", "-0.5")
    assert a["change"] != ""


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("who", "status"), [("alice", 200), ("bob", 200), ("carol", 200), ("mallory", 403)]
)
def test_it_lets_every_role_that_sees_the_run_page_download(client, request, who, status):
    run = _run(1)
    client.force_login(request.getfixturevalue(who))
    for name in ("interop:run-export", "interop:labels-export"):
        response = client.get(reverse(name, kwargs={"run_id": run.uuid}), {"format": "csv"})
        assert response.status_code == status


@pytest.mark.django_db
def test_it_serves_parquet_and_refuses_an_unknown_zone_with_a_400(client, carol):
    run = _run(1)
    client.force_login(carol)
    url = reverse("interop:run-export", kwargs={"run_id": run.uuid})
    response = client.get(url, {"format": "parquet"})
    assert response.status_code == 200
    assert pd.read_parquet(io.BytesIO(response.content))["case_id"].tolist() == ["k0"]
    bad = client.get(url, {"tz": "Mars/Olympus"})
    assert bad.status_code == 400 and b"tz" in bad.content


@pytest.mark.django_db
def test_it_writes_an_export_file_from_the_command(tmp_path):
    run = _run(2)
    out = tmp_path / "run.csv"
    call_command(
        "export_results",
        "run",
        str(run.uuid),
        "--format",
        "csv",
        "--out",
        str(out),
        "--tz",
        "Asia/Shanghai",
        stdout=io.StringIO(),
    )
    rows = _csv_dicts(out.read_bytes())
    assert [r["case_id"] for r in rows] == ["k0", "k1"]
    assert rows[0]["created_at"] == "2025-02-24T23:30:00+08:00"
