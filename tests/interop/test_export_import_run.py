"""``export_run`` / ``import_run``: a strict-JSON baseline file read back losslessly."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from core.errors import DomainError
from evals.comparison.run_data import run_data_from_file, run_data_get
from evals.grading.grader_config import parse_grader_specs
from evals.models import Grade, Run, Trial
from evals.report.selectors import run_report
from judges.models import JudgeVersion
from tests.comparison_builders import judge_version
from tests.report_builders import mixed_run

pytestmark = pytest.mark.django_db

# Identity, and the status shown: the copy is imported (evals.run_status), the original not.
IDENTITY = {"run_uuid", "case_uuid", "suite_name", "run_name", "status_shown"}


def _figures(report) -> dict:
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in IDENTITY}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(report.to_dict())


def _judged_mixed_run():
    run = mixed_run()
    v = judge_version(3, trusted=False)
    Grade.objects.filter(trial__run=run, grader="a").update(judge_version=v)
    Trial.objects.filter(run=run, case__key="c1", attempt=1).update(output='Paris\n"quoted"')
    return run


def test_it_reimports_a_run_with_the_same_report_figures(tmp_path, capsys):
    run = _judged_mixed_run()
    path = tmp_path / "run.json"
    call_command("export_run", str(run.uuid), "--out", str(path))
    call_command("import_run", str(path), "--suite", "S2")
    copy = Run.objects.get(suite__name="S2")
    assert copy.source == Run.Source.IMPORTED and copy.name == run.name
    assert _figures(run_report(run=copy)) == _figures(run_report(run=run))
    shown = run_report(run=copy).status_shown
    assert (shown["label"], shown["errored"]) == ("imported", 1)  # its errored trial, said
    original = Trial.objects.get(run=run, case__key="c1", attempt=1)
    again = Trial.objects.get(run=copy, case__key="c1", attempt=1)
    assert again.output == original.output and again.created_at == original.created_at
    # Runs named by name and UUID (never an internal id), trials as finished (of planned).
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"wrote {path} (run {run.name} ({run.uuid}) of suite {run.suite.name})"
    assert out[1] == f"imported S2/{copy.name} ({copy.uuid}): 6 of 6 trials finished, 1 errored"


def test_it_reads_the_file_as_the_same_run_data_as_the_database(tmp_path):
    run = _judged_mixed_run()
    path = tmp_path / "run.json"
    call_command("export_run", str(run.uuid), "--out", str(path), "--no-outputs")
    from_file = run_data_from_file(path)
    from_db = run_data_get(run=run)
    assert from_file.cases == from_db.cases
    assert from_file.graders == from_db.graders
    assert from_file.provisional == 5  # grader "a" (gating) on 5 ok trials, untrusted judge


def test_it_writes_strict_json_without_nan(tmp_path):
    run = _judged_mixed_run()
    path = tmp_path / "run.json"
    call_command("export_run", f"S/{run.name}", "--out", str(path))
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text, parse_constant=lambda t: pytest.fail(f"non-strict token {t}"))
    assert data["format"] == "assay-run"
    assert {c["key"] for c in data["cases"]} == {"c1", "c2", "c3"}
    assert all(len(c["content_hash"]) == 64 for c in data["cases"])


def test_it_refuses_a_file_whose_case_content_does_not_match_its_hash(tmp_path):
    run = _judged_mixed_run()
    path = tmp_path / "run.json"
    call_command("export_run", str(run.uuid), "--out", str(path))
    data = json.loads(path.read_text())
    data["cases"][1]["input"] = "tampered"
    path.write_text(json.dumps(data))
    with pytest.raises(CommandError, match=r"cases\[1\]\.content_hash"):
        call_command("import_run", str(path), "--suite", "S3")
    assert not Run.objects.filter(suite__name="S3").exists()


def test_it_refuses_a_run_name_that_is_taken(tmp_path):
    run = _judged_mixed_run()
    path = tmp_path / "run.json"
    call_command("export_run", str(run.uuid), "--out", str(path))
    with pytest.raises(CommandError, match="run.name: 'R1' already exists"):
        call_command("import_run", str(path))
    call_command("import_run", str(path), "--name", "R1-copy")
    assert Run.objects.filter(name="R1-copy", suite=run.suite).exists()


def test_it_names_judges_by_name_and_number_and_an_import_keeps_uuid_and_number(tmp_path):
    run = _judged_mixed_run()
    v = JudgeVersion.objects.get(number=3)
    run.graders = [{"key": "a", "kind": "judge", "config": {"judge_version": str(v.uuid)}}]
    run.save(update_fields=["graders"])
    path = tmp_path / "run.json"
    call_command("export_run", str(run.uuid), "--out", str(path))
    data = json.loads(path.read_text())
    config = data["run"]["graders"][0]["config"]
    assert config == {"judge_version": str(v.uuid), "judge": "judge", "judge_number": 3}
    Run.objects.all().delete()
    JudgeVersion.objects.all().delete()
    call_command("import_run", str(path))
    again = JudgeVersion.objects.get()
    assert (again.uuid, again.judge.name, again.number) == (v.uuid, "judge", 3)
    assert parse_grader_specs(data["run"]["graders"])[0].config["judge_version"] == str(v.uuid)


def test_a_grader_set_names_a_judge_by_name_and_number_when_its_uuid_is_unknown_here():
    v = judge_version(2, trusted=False)
    unknown = "00000000-0000-4000-8000-000000000001"
    by_both = {"judge_version": unknown, "judge": "judge", "judge_number": 2}
    for config in (by_both, {"judge": "judge", "judge_number": 2}, {"judge_version": "judge:v2"}):
        specs = parse_grader_specs([{"key": "j", "kind": "judge", "config": config}])
        assert specs[0].config["judge_version"] == str(v.uuid)
    with pytest.raises(DomainError, match=rf"graders\[0\]\.config\.judge_version: no .*{unknown}"):
        parse_grader_specs([{"key": "j", "kind": "judge", "config": {"judge_version": unknown}}])
    with pytest.raises(
        DomainError, match=r"graders\[0\]\.config\.judge: no judge version 'judge:v7'"
    ):
        parse_grader_specs(
            [{"key": "j", "kind": "judge", "config": {**by_both, "judge_number": 7}}]
        )


def test_a_run_judged_by_a_live_judge_imports_back_into_the_database_it_came_from(tmp_path):
    # A live judge version has a base_url, part of its content hash: the import finds it by
    # that same hash instead of creating a twin that collides with it.
    run = _judged_mixed_run()
    v = JudgeVersion.objects.get(number=3)
    JudgeVersion.objects.filter(id=v.id).update(base_url="http://127.0.0.1:9/v1")
    v.refresh_from_db()
    v.save()  # the content hash now covers the base_url
    path = tmp_path / "run.json"
    call_command("export_run", str(run.uuid), "--out", str(path))

    call_command("import_run", str(path), "--name", "R1-again")

    copy = Run.objects.get(name="R1-again")
    assert list(JudgeVersion.objects.values_list("id", flat=True)) == [v.id]
    assert set(
        Grade.objects.filter(trial__run=copy, grader="a").values_list("judge_version", flat=True)
    ) == {v.id}
