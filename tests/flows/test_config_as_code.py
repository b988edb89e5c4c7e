"""Config as code (issue 16, point 1): a fresh database set up only from the config file kept
in the repository (examples/assay.toml: a suite with its cases file, a judge, targets and a
grader set naming the judge by name) runs the suite and gates it; docs/config.md shows that
same file."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from core.errors import DomainError
from evals.models import Case, GraderSetPreset, Run, Suite
from interop.config import config_apply
from judges.models import JudgeVersion
from tests.conftest import PROJECT_DIR
from tests.fakellm import FakeLLM
from tests.judge_builders import verdict_json

# A transactional test restores the roles' groups (a data migration) afterwards.
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

EXAMPLE = PROJECT_DIR / "examples"


def _copy_example(tmp_path, base_url: str):
    shutil.copytree(EXAMPLE / "cases", tmp_path / "cases")
    text = (EXAMPLE / "assay.toml").read_text(encoding="utf-8")
    assert "https://api.openai.com/v1" in text
    path = tmp_path / "assay.toml"
    path.write_text(text.replace("https://api.openai.com/v1", base_url), encoding="utf-8")
    return path


def _apply(path) -> dict:
    out = StringIO()
    call_command("apply_config", str(path), "--json", stdout=out)
    return json.loads(out.getvalue())


def _gate(*args, capsys) -> int:
    with pytest.raises(SystemExit) as info:
        call_command("gate", *args)
    capsys.readouterr()
    return info.value.code


def test_the_repository_config_sets_up_a_fresh_database_that_runs_and_gates(tmp_path, capsys):
    # Fresh: nothing but what migrations create (a CI job's database after `migrate`).
    assert not Suite.objects.exists() and not JudgeVersion.objects.exists()
    assert not GraderSetPreset.objects.exists() and not Run.objects.exists()
    with FakeLLM(responder=lambda body: verdict_json("pass")) as llm:
        path = _copy_example(tmp_path, llm.base_url)
        first = _apply(path)
        assert first["suites"] == [
            {
                "name": "support",
                "uuid": str(Suite.objects.get().uuid),
                "action": "created",
                "cases": {
                    "created": 5,
                    "unchanged": 0,
                    "retagged": 0,
                    "replaced": 0,
                    "retired": 0,
                    "not_in_file": 0,
                },
            }
        ]
        version = JudgeVersion.objects.get(judge__name="helpfulness")
        graders = GraderSetPreset.objects.get(name="smoke").graders
        assert graders[2]["config"]["judge_version"] == str(version.uuid)  # named, stored by id
        for name, target in (("base", "prod"), ("same", "prod"), ("broken", "prod-broken")):
            call_command(
                "run_suite",
                "support",
                "--target-preset",
                target,
                "--grader-set",
                "smoke",
                "--name",
                name,
                "--wait",
                stdout=StringIO(),
            )
        assert llm.requests > 0  # the judge rung ran, against the judge the file declared
    assert {r.status for r in Run.objects.all()} == {"succeeded"}
    assert Run.objects.get(name="base").trials.count() == 25  # 5 cases x the default 5 trials
    assert _gate("--head", "same", "--base", "base", capsys=capsys) == 0  # unique run names
    assert _gate("--head", "support/broken", "--base", "support/base", capsys=capsys) == 1
    again = _apply(path)
    assert [r["action"] for r in again["suites"] + again["targets"] + again["grader_sets"]] == [
        "unchanged"
    ] * 4
    assert again["judges"][0]["action"] == "unchanged"


def test_a_changed_cases_file_replaces_cases_and_never_retires_one_silently(tmp_path):
    path = _copy_example(tmp_path, "http://127.0.0.1:9/v1")
    _apply(path)
    lines = (tmp_path / "cases" / "support.jsonl").read_text().splitlines()
    changed = json.loads(lines[0])
    changed["expected"] = "60 days"
    (tmp_path / "cases" / "support.jsonl").write_text(
        "\n".join([json.dumps(changed), *lines[1:3]]) + "\n"
    )
    out = StringIO()
    call_command("apply_config", str(path), stdout=out)
    assert "suite support: updated (2 unchanged, 1 replaced, 2 not in file)" in out.getvalue()
    assert Case.objects.active().count() == 5  # two left out: kept, and said so
    text = path.read_text().replace(
        'kind = "regression"', 'kind = "regression"\nretire_missing = true'
    )
    path.write_text(text)
    assert _apply(path)["suites"][0]["cases"]["retired"] == 2
    assert Case.objects.active().count() == 3


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (
            lambda t: t.replace('judge_version = "helpfulness"', 'judge_version = "nobody"'),
            r"grader_sets\.smoke\.graders\[2\]\.config\.judge_version",
        ),
        (
            lambda t: t.replace(
                'cases_file = "cases/support.jsonl"', 'cases_file = "missing.jsonl"'
            ),
            r"suites\.support\.cases_file",
        ),
        (
            lambda t: t.replace('kind = "regression"', 'kind = "regresion"'),
            r"suites\.support\.kind",
        ),
        (  # a TOML time has no JSON form: it stopped apply_config with a traceback
            lambda t: t.replace("temperature = 0", "temperature = 0\nwhen = 07:32:00"),
            r"judges\[0\]\.params\.when",
        ),
    ],
)
def test_a_bad_entry_names_its_field_and_nothing_is_written(tmp_path, mutate, field):
    path = _copy_example(tmp_path, "http://127.0.0.1:9/v1")
    path.write_text(mutate(path.read_text()))
    with pytest.raises(DomainError) as info:
        config_apply(document=tomllib.loads(path.read_text()), base_dir=tmp_path)
    assert re.match(field, info.value.field)
    assert not Suite.objects.exists() and not JudgeVersion.objects.exists()


def test_a_bad_line_in_the_cases_file_names_the_line_and_field(tmp_path):
    path = _copy_example(tmp_path, "http://127.0.0.1:9/v1")
    with (tmp_path / "cases" / "support.jsonl").open("a") as fh:
        fh.write('{"key": "x", "input": "q", "tags": "billing"}\n')
    with pytest.raises(DomainError) as info:
        config_apply(document=tomllib.loads(path.read_text()), base_dir=tmp_path)
    assert info.value.field == "suites.support.cases_file:6.tags"


def test_docs_config_shows_the_example_file_verbatim():
    doc = (PROJECT_DIR / "docs" / "config.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", doc, flags=re.S)
    assert (EXAMPLE / "assay.toml").read_text(encoding="utf-8") in blocks


def test_a_toml_date_in_a_case_is_refused_naming_it_not_a_traceback(tmp_path):
    path = tmp_path / "assay.toml"
    path.write_text(
        '[suites.dated]\ncases = [ { key = "k1", input = "a", expected = 1979-05-27 } ]\n'
    )
    with pytest.raises(CommandError, match=r"suites\.dated\.cases\[0\]\.expected: a TOML date"):
        call_command("apply_config", str(path))
    assert not Suite.objects.exists()
