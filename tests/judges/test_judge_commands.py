"""``manage.py judge_run`` and ``manage.py apply_config``."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evals.models import Grade
from judges import client as judge_client
from judges.models import JudgeRun, JudgeVersion
from tests.fakellm import FakeLLM
from tests.judge_builders import make_trials, make_version, verdict_json

pytestmark = pytest.mark.django_db

TOML = """
[[judges]]
name = "helpfulness"
kind = "rubric"
model = "judge-model"
base_url = "http://127.0.0.1:9/v1"
[judges.params]
temperature = {temperature}
criteria = "answers the question"
"""


def _apply(tmp_path, text):
    path = tmp_path / "assay.toml"
    path.write_text(text)
    out = StringIO()
    call_command("apply_config", str(path), "--json", stdout=out)
    return json.loads(out.getvalue())["judges"]


def test_applying_the_same_file_twice_changes_nothing(tmp_path):
    first = _apply(tmp_path, TOML.format(temperature=0))
    second = _apply(tmp_path, TOML.format(temperature=0))
    assert [r["action"] for r in first + second] == ["created", "unchanged"]
    assert JudgeVersion.objects.count() == 1


def test_a_changed_judge_makes_a_new_version_and_says_so(tmp_path):
    _apply(tmp_path, TOML.format(temperature=0))
    path = tmp_path / "assay.toml"
    path.write_text(TOML.format(temperature=1))
    out = StringIO()
    call_command("apply_config", str(path), stdout=out)
    version = JudgeVersion.objects.get(number=2)
    assert out.getvalue().strip() == (
        f"judge helpfulness: new version 2 (untrusted); helpfulness:v2 = {version.uuid}"
    )


def test_it_names_the_bad_field(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[[judges]]\nname = "x"\nkind = "rubric"\nmodel = "m"\n')
    with pytest.raises(CommandError, match=r"judges\[0\]\.base_url"):
        call_command("apply_config", str(path))


def test_judge_run_grades_a_run_and_reports_provisional_json(
    monkeypatch, django_capture_on_commit_callbacks
):
    async def fake_sleep(seconds):
        return None

    monkeypatch.setattr(judge_client, "default_sleep", fake_sleep)
    with FakeLLM(responder=lambda body: verdict_json("PASS")) as llm:
        trials = make_trials(["Paris", "[fault=500]"])
        version = make_version(llm)
        out = StringIO()
        with django_capture_on_commit_callbacks(execute=True):
            call_command(
                "judge_run", str(trials[0].run.uuid), str(version.uuid), "--json", stdout=out
            )
    started = json.loads(out.getvalue())
    assert (started["status"], started["trials_total"], started["provisional"]) == (
        "queued",
        2,
        True,
    )
    judge_run = JudgeRun.objects.get()
    assert (judge_run.status, judge_run.trials_graded, judge_run.trials_errored) == (
        "succeeded",
        2,
        1,
    )
    assert Grade.objects.get(trial=trials[1]).reason == "server_error"
