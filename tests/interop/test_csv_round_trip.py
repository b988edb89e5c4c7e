"""CSV slips of issue 13: empty cells are null; a run's CSV export re-imported into its suite
comes back with its types intact and retires nothing (and an import that does retire cases
says which); exported cells never run as spreadsheet formulas, Parquet keeps exact values."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import pandas as pd
import pytest
from django.core.management import call_command
from django.urls import reverse

from core.errors import DomainError
from evals.cases import CaseSpec, cases_upsert
from evals.grading.grader_config import parse_grader_specs
from evals.grading.graders import run_grader
from evals.models import Case, Grade, Run, Suite, Trial
from interop import exports
from labeling.models import Label
from tests.core.test_api_core import client_for
from tests.import_helpers import import_bytes

pytestmark = pytest.mark.django_db

GRADERS = [
    {"key": "exact", "kind": "exact", "config": {}, "gating": True},
    {"key": "judge", "kind": "contains", "config": {"value": "x"}, "gating": True},
]
FORMULAS = ['=HYPERLINK("http://evil.example","click")', "+1+1", "-2", "@SUM(A1)", "\tx", "'q"]
# Seven cases whose input, expected and context a string-only CSV would confuse.
CASES = [
    CaseSpec(key="c1", input="capital of France?", expected="Paris"),
    CaseSpec(key="c2", input={"q": "2+2", "n": 4}, expected=4),
    CaseSpec(key="c3", input="no reference", expected=None),
    CaseSpec(key="c4", input="4", expected="4"),
    CaseSpec(key="c5", input='{"a":1}', expected=True),
    CaseSpec(
        key="c6",
        input={"question": "refund?"},
        expected={"ok": [1, 2.5, None]},
        context=[{"id": "d1", "text": "Refunds within 30 days."}],
        tags=["billing, EU", "[beta]"],
    ),
    CaseSpec(key="c7", input=FORMULAS[0], expected="", tags=["@x", "=y"]),
]


def _run() -> Run:
    suite = Suite.objects.create(name="S")
    cases = cases_upsert(suite=suite, specs=CASES)
    run = Run.objects.create(
        suite=suite, name="R1", graders=GRADERS, status=Run.Status.SUCCEEDED, target_kind="callable"
    )
    for i, spec in enumerate(CASES):
        trial = Trial.objects.create(
            run=run,
            case=cases[spec.key],
            attempt=1,
            status="error" if spec.key == "c3" else "ok",
            error_message="timeout after 30000 ms" if spec.key == "c3" else "",
            output="" if spec.key == "c3" else FORMULAS[i % len(FORMULAS)],
            latency_ms=None if spec.key == "c3" else 12.5 + i,
            input_tokens=None if spec.key == "c3" else 10 * i,
            output_tokens=None if spec.key == "c3" else i,
            cost_usd=None if spec.key == "c3" else Decimal("0.00000000") * i,
        )
        if spec.key != "c3":
            Grade.objects.create(
                trial=trial,
                grader="exact",
                status="ok",
                passed=i % 2 == 0,
                score=float(i % 2 == 0),
                reason=f"-reason {i}",
            )
            Grade.objects.create(
                trial=trial,
                grader="judge",
                status="error",
                passed=None,
                score=None,
                reason="unparseable",
            )
    return run


def _rows(run: Run) -> list[list]:
    """The run's export rows without the run name (the import names its own run)."""
    return [row[:1] + row[2:] for row in exports.run_table(run=run).rows]


def _csv_dicts(body: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(body.decode("utf-8"), newline="")))


# --- empty cells ----------------------------------------------------------------------------


def test_an_empty_csv_cell_is_null_so_a_reference_grader_errors_rather_than_fails():
    import_bytes(
        b"case_id,input,expected,note\r\nc1,q1,,\r\nc2,q2,4,kept\r\n",
        filename="r.csv",
        suite="E",
        run="r",
    )
    c1, c2 = Case.objects.filter(suite__name="E").order_by("key")
    assert (c1.expected, c2.expected) == (None, "4")
    extras = [t.raw_response["extra"] for t in Trial.objects.order_by("case__key")]
    assert extras == [{"note": None}, {"note": "kept"}]
    (spec,) = parse_grader_specs([{"key": "exact", "kind": "exact", "config": {}}])
    result = run_grader(spec, case=c1, output="")
    assert result.passed is None and result.status == "error"
    assert result.reason.startswith("no reference")


# --- the round trip -------------------------------------------------------------------------


def test_a_run_export_reimported_into_its_suite_keeps_every_type_and_retires_nothing():
    run = _run()
    body = exports.table_csv(exports.run_table(run=run))
    summary = import_bytes(body, filename="export.csv", suite="S", run="again")
    assert summary.retired_cases == [] and summary.as_json()["retired_count"] == 0
    assert Case.objects.filter(suite=run.suite).count() == 7  # nothing replaced
    assert not Case.objects.filter(retired_at__isnull=False).exists()
    again = Run.objects.get(name="again")
    assert _rows(again) == _rows(run)
    stored = {c.key: (c.input, c.expected, c.context, c.tags) for c in Case.objects.all()}
    assert stored == {s.key: (s.input, s.expected, s.context, s.tags) for s in CASES}
    errored = Trial.objects.get(run=again, case__key="c3")
    assert (errored.status, errored.error_message, errored.cost_usd) == (
        "error",
        "timeout after 30000 ms",
        None,
    )
    grade = Grade.objects.get(trial__run=again, trial__case__key="c2", grader="exact")
    assert (grade.passed, grade.score, grade.status, grade.reason) == (
        False,
        0.0,
        "ok",
        "-reason 1",
    )
    judged = Grade.objects.get(trial__run=again, trial__case__key="c2", grader="judge")
    assert (judged.passed, judged.score, judged.status) == (None, None, "error")


def test_a_run_export_imported_into_a_new_suite_gives_the_same_cases():
    run = _run()
    body = exports.table_csv(exports.run_table(run=run))
    import_bytes(body, filename="export.csv", suite="copy", run="R1")
    copy = {c.key: c.content_hash for c in Case.objects.filter(suite__name="copy")}
    assert copy == {c.key: c.content_hash for c in Case.objects.filter(suite=run.suite)}


def test_an_edited_export_is_refused_naming_content_hash_unless_the_hash_is_emptied():
    run = _run()
    rows = _csv_dicts(exports.table_csv(exports.run_table(run=run)))
    header = list(rows[0])
    rows[1]["expected"] = "5"  # c2 expected 4 -> 5

    def body(rows) -> bytes:
        out = io.StringIO(newline="")
        writer = csv.DictWriter(out, fieldnames=header, lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(rows)
        return out.getvalue().encode()

    with pytest.raises(DomainError) as caught:
        import_bytes(body(rows), filename="edited.csv", suite="S", run="edited")
    assert (caught.value.field, caught.value.record) == ("content_hash", None)
    assert str(caught.value).startswith("row 2 (line 3): field content_hash:")
    assert not Run.objects.filter(name="edited").exists()
    rows[1]["content_hash"] = ""
    summary = import_bytes(body(rows), filename="edited.csv", suite="S", run="edited")
    assert Case.objects.get(key="c2", retired_at__isnull=True).expected == 5  # typed JSON
    assert summary.retired_cases == ["c2"]


# --- retiring is never silent -----------------------------------------------------------------


def _changed_csv() -> bytes:
    return b"case_id,input,expected\r\nc1,new question,x\r\nc2,same,y\r\nc3,new too,z\r\n"


def _seed_suite():
    import_bytes(
        b"case_id,input,expected\r\nc1,old question,x\r\nc2,same,y\r\nc3,old too,z\r\n",
        filename="a.csv",
        suite="R",
        run="first",
    )


def test_an_import_that_retires_cases_says_which():
    _seed_suite()
    summary = import_bytes(_changed_csv(), filename="b.csv", suite="R", run="second")
    assert summary.retired_cases == ["c1", "c3"]
    assert summary.as_json()["retired_cases"] == ["c1", "c3"]
    assert summary.retired_sentence() == (
        "Retired 2 cases of the suite, replaced by the file's new content for the same key: c1, c3."
    )
    retired = Case.objects.filter(suite__name="R", retired_at__isnull=False)
    assert sorted(retired.values_list("key", flat=True)) == ["c1", "c3"]


def test_the_command_the_upload_and_the_api_say_which_cases_were_retired(tmp_path, client, carol):
    _seed_suite()
    path = tmp_path / "b.csv"
    path.write_bytes(_changed_csv())
    out = io.StringIO()
    call_command("import_results", str(path), "--suite", "R", "--run", "cmd", stdout=out)
    assert "Retired 2 cases of the suite" in out.getvalue() and "c1, c3." in out.getvalue()
    # the suite now holds the new content: give c2 new content for the other surfaces
    changed = b"case_id,input,expected\r\nc2,changed,y\r\n"
    response = client_for(carol).post(
        "/api/imports",
        {"file": io.BytesIO(changed), "suite": "R", "run": "api"},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    assert (response.json()["retired_cases"], response.json()["retired_count"]) == (["c2"], 1)
    client.force_login(carol)
    upload = io.BytesIO(b"case_id,input,expected\r\nc2,changed again,y\r\n")
    upload.name = "c.csv"
    page = client.post(
        reverse("interop:import-upload"),
        {"file": upload, "suite": "R", "run": "ui", "suite_kind": "regression"},
        follow=True,
    )
    assert "Retired 1 case of the suite" in page.content.decode()


def test_import_run_says_which_cases_its_file_retired(tmp_path):
    _seed_suite()
    run = Run.objects.get(name="first")
    path = tmp_path / "run.json"
    call_command("export_run", str(run.uuid), "--out", str(path))
    # suite R2 holds c1 and c3 with other content than the file's: importing retires them
    import_bytes(_changed_csv(), filename="b.csv", suite="R2", run="second")
    out = io.StringIO()
    call_command("import_run", str(path), "--suite", "R2", stdout=out)
    assert "Retired 2 cases of the suite" in out.getvalue() and "c1, c3." in out.getvalue()


# --- formulas -----------------------------------------------------------------------------------


def test_csv_exports_neutralise_formula_cells_and_parquet_keeps_exact_values():
    run = _run()
    table = exports.run_table(run=run)
    rows = {r["case_id"]: r for r in _csv_dicts(exports.table_csv(table))}
    assert rows["c1"]["output"] == "'" + FORMULAS[0]
    assert [rows[k]["output"] for k in ("c2", "c4", "c5", "c6")] == [
        "'+1+1",
        "'@SUM(A1)",
        "'\tx",
        "''q",
    ]
    assert rows["c7"]["input"] == "'" + FORMULAS[0]
    assert rows["c7"]["tags"] == "'@x,=y"
    assert rows["c2"]["exact.reason"] == "'-reason 1"
    assert rows["c2"]["latency_ms"] == "13.5" and rows["c3"]["output"] == ""  # numbers as is
    for row in rows.values():
        for cell in row.values():
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
    frame = pd.read_parquet(io.BytesIO(exports.table_parquet(table)))
    assert frame.loc[frame["case_id"] == "c1", "output"].item() == FORMULAS[0]
    assert frame.loc[frame["case_id"] == "c7", "input"].item() == FORMULAS[0]


def test_every_csv_export_neutralises_formulas(carol):
    run = _run()
    trial = Trial.objects.get(run=run, case__key="c1")
    Label.objects.create(
        trial=trial, reviewer_name="@gold", verdict="fail", critique="=1+1", source="import"
    )
    other = Run.objects.create(
        suite=run.suite, name="-head", graders=GRADERS, status=Run.Status.SUCCEEDED
    )
    api = client_for(carol)
    urls = (
        f"/api/runs/{run.uuid}/export?format=csv",
        f"/api/runs/{run.uuid}/labels-export?format=csv",
        f"/api/comparisons/export?base={run.uuid}&head={other.uuid}&format=csv",
    )
    seen = []
    for url in urls:
        response = api.get(url)
        assert response.status_code == 200, url
        for line in csv.reader(io.StringIO(response.content.decode(), newline="")):
            seen += line
            for cell in line:
                assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), (url, cell)
    assert "'=1+1" in seen and "'@gold" in seen  # the label's critique and reviewer


@pytest.mark.parametrize("text", ["=1", "+x", "-", "@", "\t", "\r", "'", "''=", "plain", "a=b", ""])
def test_neutralising_is_undone_exactly(text):
    cell = exports.formula_neutralise(text)
    assert not cell.startswith(("=", "+", "-", "@", "\t", "\r"))
    assert exports.formula_restore(cell) == text


def test_a_header_that_starts_like_an_export_but_breaks_a_grader_group_is_refused():
    run = _run()
    body = exports.table_csv(exports.run_table(run=run)).replace(b"exact.score", b"exact.points", 1)
    with pytest.raises(DomainError, match="starts like an Assay run export"):
        import_bytes(body, filename="export.csv", suite="S", run="broken")


def test_the_ingest_api_says_which_cases_it_retired(carol):
    _seed_suite()  # suite R: c1 "old question", c2 "same", c3 "old too"
    body = {
        "suite": "R",
        "run": "ingested",
        "trials": [
            {"case_id": "c1", "input": "brand new", "expected": "x", "output": "o"},
            {"case_id": "c2", "input": "same", "expected": "y", "output": "o"},
        ],
    }
    response = client_for(carol).post(
        "/api/ingest", data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 201, response.content
    assert (response.json()["retired_cases"], response.json()["retired_count"]) == (["c1"], 1)
