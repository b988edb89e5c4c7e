"""The run's CSV and Parquet exports carry every token class, and the run-export import reads
them back with named errors."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.errors import DomainError
from evals.models import Run, Trial
from interop import exports
from tests.import_helpers import import_bytes
from tests.report_builders import add_trial, make_run

pytestmark = pytest.mark.django_db

GRADERS = [{"key": "exact", "kind": "exact_match", "config": {}, "gating": True}]
CLASSES = ("cache_write_tokens", "cache_read_tokens", "reasoning_tokens")
USAGE = ("input_tokens", "output_tokens", *CLASSES, "cost_usd")


def _run() -> Run:
    run = make_run(cases=[("k0", ["t"]), ("k1", ["t"])], graders=GRADERS)
    add_trial(run, "k0", 1, grades={"exact": True}, cost="0.0012", tokens=(10, 3), latency=5)
    add_trial(run, "k1", 1, grades={"exact": False}, cost=None, tokens=(None, None), latency=6)
    Trial.objects.filter(run=run, case__key="k0").update(
        cache_write_tokens=0, cache_read_tokens=4096, reasoning_tokens=77
    )
    return run


def _usage(run: Run) -> dict:
    return {
        t.case.key: tuple(getattr(t, f) for f in USAGE)
        for t in Trial.objects.filter(run=run).select_related("case")
    }


def _rows(body: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(body.decode("utf-8"), newline="")))


def test_the_csv_export_writes_every_class_beside_the_tokens_and_unknown_as_empty():
    body = exports.table_csv(exports.run_table(run=_run()))
    records = list(csv.DictReader(io.StringIO(body.decode("utf-8"), newline="")))
    header = _rows(body)[0]
    at = header.index("output_tokens")
    assert header[at : at + 5] == ["output_tokens", *CLASSES, "cost_usd"]
    assert [tuple(r[c] for c in ("input_tokens", *CLASSES)) for r in records] == [
        ("10", "0", "4096", "77"),
        ("", "", "", ""),
    ]


def test_the_parquet_export_types_every_class_as_int64_with_null_kept_null():
    table = exports.run_table(run=_run())
    data = exports.table_parquet(table)
    schema = pq.read_schema(io.BytesIO(data))
    assert [schema.field(c).type for c in CLASSES] == [pa.int64()] * 3
    frame = pd.read_parquet(io.BytesIO(data))
    assert frame["cache_read_tokens"].iloc[0] == 4096
    assert frame["cache_write_tokens"].iloc[0] == 0  # a stated 0, not unknown
    assert frame["reasoning_tokens"].isna().tolist() == [False, True]


def test_a_csv_export_imported_back_keeps_every_class():
    run = _run()
    body = exports.table_csv(exports.run_table(run=run))
    import_bytes(body, filename="export.csv", suite="S", run="again")
    again = Run.objects.get(name="again")
    assert _usage(again) == _usage(run)
    assert _usage(again)["k0"][:5] == (10, 3, 0, 4096, 77)


def test_an_export_from_before_the_classes_imports_with_them_unknown():
    rows = _rows(exports.table_csv(exports.run_table(run=_run())))
    drop = [rows[0].index(c) for c in CLASSES]
    old = [[cell for i, cell in enumerate(row) if i not in drop] for row in rows]
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\r\n").writerows(old)
    import_bytes(out.getvalue().encode(), filename="old.csv", suite="S", run="old")
    trial = Trial.objects.get(run__name="old", case__key="k0")
    assert (trial.input_tokens, trial.output_tokens) == (10, 3)
    assert (trial.cache_write_tokens, trial.cache_read_tokens, trial.reasoning_tokens) == (
        None,
        None,
        None,
    )
    # Its grades were read as the export's, not kept as extra text.
    assert trial.grades.get().grader == "exact" and trial.raw_response["extra"] == {}


@pytest.mark.parametrize(
    ("column", "cell", "message"),
    [
        ("cache_read_tokens", "-5", "expected an integer >= 0, got '-5'"),
        ("reasoning_tokens", "x", "expected an integer >= 0, got 'x'"),
        ("cache_write_tokens", "1.5", "expected an integer >= 0, got '1.5'"),
        ("cache_read_tokens", str(2**40), "expected an integer from 0 to 2,147,483,647"),
    ],
)
def test_a_bad_class_cell_is_refused_naming_row_and_column(column, cell, message):
    rows = _rows(exports.table_csv(exports.run_table(run=_run())))
    rows[2][rows[0].index(column)] = cell
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\r\n").writerows(rows)
    with pytest.raises(DomainError) as caught:
        import_bytes(out.getvalue().encode(), filename="bad.csv", suite="S", run="bad")
    assert f"row 2 (line 3): field {column}: {message}" in str(caught.value)
    assert not Run.objects.filter(name="bad").exists()
