"""``manage.py import_results``: JSON output, errors as CommandError with nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evals.models import Case, Suite, Trial
from tests.conftest import PROJECT_DIR
from tests.import_helpers import PAIR_TEMPLATE, jsonl, record

pytestmark = pytest.mark.django_db


def _call(*args) -> str:
    out = StringIO()
    call_command("import_results", *args, stdout=out)
    return out.getvalue()


def test_it_prints_strict_json_of_what_was_created(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_bytes(jsonl([record(id="a"), record(id="b", judge_labels=[])]))
    data = json.loads(_call(str(path), "--suite", "S", "--run", "R", "--json"))
    assert data["suite"] == "S" and data["runs"] == ["R"] and data["format"] == "labeled"
    assert (data["cases"], data["trials"], data["grades"], data["labels"]) == (2, 2, 3, 2)
    assert (data["preference_labels"], data["pairwise_verdicts"], data["judge_versions"]) == (
        0,
        0,
        1,
    )


def test_it_imports_pairwise_records_into_two_runs(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(jsonl([record(PAIR_TEMPLATE)]))
    data = json.loads(_call(str(path), "--suite", "S", "--run", "R", "--json"))
    assert data["runs"] == ["R / A", "R / B"]
    assert (data["trials"], data["preference_labels"], data["pairwise_verdicts"]) == (2, 1, 2)


def test_it_imports_a_bom_csv_with_a_mapping(tmp_path):
    path = tmp_path / "results.csv"
    path.write_bytes(b'\xef\xbb\xbfcase_id,input,expected\r\nc1,"What is 2+2?",4\r\n')
    _call(
        str(path),
        "--suite",
        "S",
        "--run",
        "R",
        "--map",
        "case_id=case_id",
        "--map",
        "input=input",
        "--map",
        "expected=expected",
    )
    case = Case.objects.get()
    assert (case.key, case.input, case.expected) == ("c1", "What is 2+2?", "4")


def test_it_raises_command_error_naming_the_line_and_writes_nothing(tmp_path):
    recs = [record(id=f"c{i}") for i in range(5)]
    recs[2]["human_label"]["value"] = "Pass"
    path = tmp_path / "bad.jsonl"
    path.write_bytes(jsonl(recs))
    with pytest.raises(CommandError) as exc:
        _call(str(path), "--suite", "S", "--run", "R")
    assert "line 3: field human_label.value: expected 'pass' or 'fail', got 'Pass'" in str(
        exc.value
    )
    assert Suite.objects.count() == Case.objects.count() == Trial.objects.count() == 0


def test_with_json_an_error_is_json_on_stdout_too(tmp_path):
    recs = [record(id=f"c{i}") for i in range(5)]
    recs[2]["human_label"]["value"] = "Pass"
    path = tmp_path / "bad.jsonl"
    path.write_bytes(jsonl(recs))
    out = StringIO()
    with pytest.raises(CommandError):
        call_command(
            "import_results", str(path), "--suite", "S", "--run", "R", "--json", stdout=out
        )
    error = json.loads(out.getvalue())["error"]
    assert error["detail"].startswith("line 3: field human_label.value")
    assert error["code"] == "invalid"
    assert Trial.objects.count() == 0


def test_it_rejects_an_unknown_mapping_field(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(b"a\n1\n")
    with pytest.raises(CommandError, match="unknown field 'colour'"):
        _call(str(path), "--suite", "S", "--run", "R", "--map", "colour=a")


def test_it_exits_non_zero_from_the_shell(tmp_path):

    path = tmp_path / "missing.jsonl"
    root = PROJECT_DIR
    proc = subprocess.run(
        [sys.executable, "manage.py", "import_results", str(path), "--suite", "S", "--run", "R"],
        cwd=root,
        capture_output=True,
        text=True,
        env={
            "DJANGO_SETTINGS_MODULE": "config.settings_test",
            "PATH": "/usr/bin:/bin",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite3'}",
        },
    )
    assert proc.returncode != 0
    assert "no such file" in proc.stderr
