"""Every importer applies the case rule to context and tags (each document id once, a tag
named by its index), run exports and run files keep a trial's status honest, and
``import_run`` prints the trials it stored."""

from __future__ import annotations

import copy
import csv
import io
import json
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from core.errors import DomainError
from evals.models import Case, Run, Trial
from interop import exports
from tests.import_helpers import import_bytes, jsonl, record
from tests.interop.test_csv_round_trip import _run
from tests.report_builders import mixed_run

pytestmark = pytest.mark.django_db


def _refused(call) -> DomainError:
    with pytest.raises(DomainError) as caught:
        call()
    return caught.value


# --- CSV/JSONL and labeled records ------------------------------------------------------------


@pytest.mark.parametrize(
    ("tags", "field", "message"),
    [
        (["a", "t" * 101], "tags[1]", "a tag is at most 100 characters, got 101"),
        (["a", "b", "a"], "tags[2]", "'a' is already tags[0]: each tag once"),
        (["a", ""], "tags[1]", "expected a non-empty string, got an empty string"),
    ],
)
def test_a_jsonl_row_names_the_tag_at_fault(tags, field, message):
    row = json.dumps({"case_id": "c1", "input": "q", "tags": tags}) + "\n"
    error = _refused(lambda: import_bytes(row.encode(), filename="r.jsonl", fmt="jsonl"))
    assert (error.field, str(error)) == (field, f"line 1: field {field}: {message}")
    assert Case.objects.count() == 0


def test_a_csv_row_names_the_tag_at_fault():
    data = b'case_id,input,tags\nc1,q,a\nc2,q,"x, y, x"\n'
    error = _refused(lambda: import_bytes(data, filename="r.csv"))
    assert str(error) == "row 2 (line 3): field tags[2]: 'x' is already tags[0]: each tag once"


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        (
            {"context": [{"doc_id": "d", "text": "a"}, {"doc_id": "d", "text": "b"}]},
            "context[1].doc_id",
            "'d' is already the id of context[0]: each document's id once",
        ),
        (
            {"tags": ["calibration"]},
            "tags[0]",
            "'calibration' is already category: each tag once",
        ),
        ({"tags": ["ok", "t" * 101]}, "tags[1]", "a tag is at most 100 characters, got 101"),
        ({"category": "c" * 101}, "category", "a tag is at most 100 characters, got 101"),
    ],
)
def test_a_labeled_record_names_the_context_id_or_tag_at_fault(changes, field, message):
    data = jsonl([record(id="ok"), record(id="bad", **changes)])
    error = _refused(lambda: import_bytes(data))
    assert (error.field, str(error)) == (field, f"line 2: field {field}: {message}")
    assert Case.objects.count() == 0


# --- Assay's CSV run export read back -----------------------------------------------------------


def _export_rows() -> list[dict]:
    body = exports.table_csv(exports.run_table(run=_run()))
    return list(csv.DictReader(io.StringIO(body.decode("utf-8"), newline="")))


def _csv_body(rows: list[dict]) -> bytes:
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def _import_export(rows: list[dict]):
    return import_bytes(_csv_body(rows), filename="export.csv", suite="S", run="again")


def test_a_run_export_row_whose_errored_trial_is_graded_passed_is_refused():
    rows = _export_rows()
    assert (rows[2]["case_id"], rows[2]["status"]) == ("c3", "error")
    rows[2].update({"exact.passed": "true", "exact.status": "ok"})
    error = _refused(lambda: _import_export(rows))
    assert (error.field, str(error)) == (
        "exact.passed",
        "row 3 (line 4): field exact.passed: a trial with status 'error' is never graded "
        "passed: the row contradicts itself",
    )
    assert not Run.objects.filter(name="again").exists()


def test_a_run_export_keeps_a_cancelled_trial_and_refuses_an_unfinished_one():
    rows = _export_rows()
    rows[2].update(status="queued", error="")
    error = _refused(lambda: _import_export(rows))
    assert str(error) == (
        'row 3 (line 4): field status: expected one of ok, error, cancelled, got "queued"'
    )
    rows[2]["status"] = "cancelled"
    _import_export(rows)
    again = Run.objects.get(name="again")
    assert Trial.objects.get(run=again, case__key="c3").status == "cancelled"
    assert (again.trials_finished, again.trials_errored) == (6, 0)


def test_a_run_export_names_a_duplicate_context_id_and_a_long_tag():
    exported = _export_rows()
    rows = copy.deepcopy(exported)
    assert rows[5]["case_id"] == "c6"
    rows[5]["content_hash"] = ""  # read the edited cells as typed JSON
    rows[5]["context"] = json.dumps([{"id": "d", "text": "a"}, {"id": "d", "text": "b"}])
    error = _refused(lambda: _import_export(rows))
    assert str(error) == (
        "row 6 (line 7): field context[1].id: 'd' is already the id of context[0]: each "
        "document's id once"
    )
    rows = copy.deepcopy(exported)
    rows[5]["tags"] = json.dumps(["a", "b", "t" * 101])
    error = _refused(lambda: _import_export(rows))
    assert str(error) == ("row 6 (line 7): field tags[2]: a tag is at most 100 characters, got 101")


# --- run files (export_run / import_run) ------------------------------------------------------


def _run_file(tmp_path, edit=None):
    run = mixed_run()
    path = tmp_path / "run.json"
    call_command("export_run", str(run.uuid), "--out", str(path))
    if edit is not None:
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data))
    return path


def _import_run(path) -> str:
    out = io.StringIO()
    call_command("import_run", str(path), "--suite", "S2", stdout=out)
    return out.getvalue()


def test_import_run_prints_the_trials_it_stored(tmp_path):
    out = _import_run(_run_file(tmp_path))
    imported = Run.objects.get(suite__name="S2")
    assert (
        out == f"imported S2/{imported.name} ({imported.uuid}): 6 of 6 trials finished, 1 errored\n"
    )


def test_import_run_of_a_partial_file_prints_the_trials_it_stored_not_the_plan(tmp_path):
    path = _run_file(tmp_path, lambda data: data["cases"][2]["trials"].pop())
    out = _import_run(path)
    imported = Run.objects.get(suite__name="S2")
    assert Trial.objects.filter(run=imported).count() == 5
    assert imported.trials_total == 6
    assert out == (
        f"imported S2/{imported.name} ({imported.uuid}): 5 of 6 trials finished, 1 errored; "
        "partial: 5 of 6 trials recorded\n"
    )


def _set(path: str, value):
    def edit(data):
        node = data
        *steps, last = re.findall(r"[^.\[\]]+", path)
        for step in steps:
            node = node[int(step)] if step.isdigit() else node[step]
        node[int(last) if last.isdigit() else last] = value

    return edit


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        (
            "cases.0.trials.0.status",
            "failed",
            'cases[0].trials[0].status: expected one of ok, error, cancelled, got "failed"',
        ),
        (
            "cases.0.trials.0.status",
            "running",
            'cases[0].trials[0].status: expected one of ok, error, cancelled, got "running"',
        ),
        (
            "cases.1.trials.1.grades",
            [{"grader": "a", "status": "ok", "passed": True}],
            "cases[1].trials[1].grades[0].passed: a trial with status 'error' is never graded "
            "passed",
        ),
        (
            "cases.0.trials.0.grades.0.status",
            "skipped",
            "cases[0].trials[0].grades[0].status: expected one of ok, error, not_judged, got "
            '"skipped"',
        ),
        (
            "cases.0.trials.0.grades.0.passed",
            "true",
            'cases[0].trials[0].grades[0].passed: expected true, false or null, got "true"',
        ),
        (
            "cases.0.context",
            [{"id": "d", "text": "a"}, {"id": "d", "text": "b"}],
            "cases[0].context[1].id: 'd' is already the id of context[0]: each document's id once",
        ),
        (
            "cases.0.tags",
            ["x", "t" * 101],
            "cases[0].tags[1]: a tag is at most 100 characters, got 101",
        ),
        (
            "cases.0.tags",
            [1],
            "cases[0].tags[0]: expected a non-empty string, got a number (1)",
        ),
        ("cases.0.key", 7, "cases[0].key: expected a non-empty string, got 7"),
        # no silent coercion: "false" is not false, "3" is not 3, 7 is not a text
        (
            "cases.0.trials.0.grades.0.gating",
            "false",
            'cases[0].trials[0].grades[0].gating: expected true or false, got "false"',
        ),
        ("run.trials_per_case", "3", 'run.trials_per_case: expected a whole number, got "3"'),
        (
            "run.trials_per_case",
            0,
            "run.trials_per_case: expected a whole number from 1 to 2,147,483,647, got 0",
        ),
        (
            "cases.0.trials.0.output",
            7,
            "cases[0].trials[0].output: expected a string or null, got 7",
        ),
        (
            "cases.0.trials.0.grades.0.reason",
            ["r"],
            'cases[0].trials[0].grades[0].reason: expected a string or null, got ["r"]',
        ),
        (
            "cases.0.trials.0.grades.0.grader",
            5,
            "cases[0].trials[0].grades[0].grader: expected a non-empty string, got 5",
        ),
        (
            "cases.0.trials.0.grades.0.score",
            "0.5",
            'cases[0].trials[0].grades[0].score: expected a number in [0, 1] or null, got "0.5"',
        ),
        (
            "cases.0.trials.0.grades.0.score",
            1.5,
            "cases[0].trials[0].grades[0].score: expected a number in [0, 1] or null, got 1.5",
        ),
        (
            "cases.0.trials.0.grades.0.details",
            [1],
            "cases[0].trials[0].grades[0].details: expected an object or null, got [1]",
        ),
        ("run", 5, "run: expected an object, got 5"),
        # the target is stored and shown to every role: no key, no secret URL, no depth bomb
        (
            "run.target",
            {"kind": "openai", "api_key_env": "sk-proj-abcdefghijklmnopqrstuvwx1234"},
            "run.target.api_key_env: looks like a key itself: a run file never holds a key (give "
            "the name of the environment variable that holds it)",
        ),
        (
            "run.target",
            {"base_url": "http://u:pw@127.0.0.1/v1"},
            "run.target.base_url: holds a user or password: give the key through the environment "
            "variable api_key_env names, never in the URL (the URL is stored and shown)",
        ),
        ("run.target", "x", 'run.target: expected an object, got "x"'),
        ("cases", "x", 'cases: expected a list of objects, got "x"'),
        ("cases.0", 5, "cases[0]: expected an object, got 5"),
        ("cases.0.trials", "x", 'cases[0].trials: expected a list of objects, got "x"'),
        ("cases.0.trials.0", 5, "cases[0].trials[0]: expected an object, got 5"),
        (
            "cases.0.trials.0.grades",
            {"grader": "a"},
            'cases[0].trials[0].grades: expected a list of objects, got {"grader": "a"}',
        ),
        (
            "cases.0.trials.0.grades",
            ["a"],
            'cases[0].trials[0].grades[0]: expected an object, got "a"',
        ),
        (
            "cases.0.trials.1.attempt",
            1,
            "cases[0].trials[1].attempt: attempt 1 of this case is already cases[0].trials[0]",
        ),
    ],
)
def test_import_run_refuses_a_file_naming_the_field(tmp_path, path, value, says):
    file = _run_file(tmp_path, _set(path, value))
    with pytest.raises(CommandError) as caught:
        _import_run(file)
    assert str(caught.value) == f"{file}: {says}"
    assert not Run.objects.filter(suite__name="S2").exists()
