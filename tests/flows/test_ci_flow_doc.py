"""The CI flow of ``docs/ci.md`` run as written: its GitHub Actions job's ``manage.py`` lines,
in the doc's order, with the files it names, against the shared mock endpoint.

The baseline is made the way the doc says (``export_run RUN --out assay/baseline.json`` on
a server), and ``assay/graders.json`` is the grader set as the exported run stores it (its
judge named by UUID). The job then runs in a "fresh container": the server's suite, runs and
judges are deleted first, so the judge exists only through the imported file.
"""

from __future__ import annotations

import json
import re
import shlex
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evals.models import Case, Grade, Run, Suite
from judges.models import Judge, JudgeVersion
from judges.versions import judge_version_create
from tests.conftest import PROJECT_DIR
from tests.mockllm import mockllm  # noqa: F401 - the fixture

DOC = PROJECT_DIR / "docs" / "ci.md"
GITHUB = {"github.event.number": "42", "github.sha": "abc123"}


def _doc_commands() -> list[list[str]]:
    """The ``python manage.py ...`` lines of the doc's first GitHub Actions job, in order,
    continuation lines joined, ``|| true`` dropped, ``${{ github.* }}`` filled in."""
    text = DOC.read_text()
    block = text.split("## GitHub Actions", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    block = block.replace("\\\n", " ")
    lines = []
    for raw in block.splitlines():
        line = raw.strip()
        if not line.startswith("python manage.py "):
            continue
        line = line.split("||", 1)[0].strip()
        line = re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", lambda m: GITHUB[m[1]], line)
        lines.append(shlex.split(line)[2:])
    return lines


def _exit_code(args: list[str]) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command(*args, stdout=out, stderr=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue() + str(exc)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def _server_baseline(folder: Path, base_url: str) -> None:
    """On "the server": a suite of 3 cases, a judge, a run of 5 trials a case graded by a
    contains check and the judge, exported to ``assay/baseline.json``; ``assay/target.json``
    and ``assay/graders.json`` (the run's stored grader set) beside it."""
    suite = Suite.objects.create(name="my-suite")
    for i in range(3):
        key = f"c{i}"
        Case.objects.create(
            suite=suite,
            key=key,
            input=f"[case={key} p=1.0 expect=ANSWER-{key}] Answer.",
            expected=f"ANSWER-{key}",
        )
    judge, _ = judge_version_create(
        judge_name="helpful",
        kind="rubric",
        model="mock-judge",
        base_url=base_url,
        prompt_template="",
        params={"max_attempts": 1},
        output_schema={},
    )
    target = {
        "kind": "openai",
        "base_url": base_url,
        "model": "mock-model",
        "prompt_template": "$input",
        "max_attempts": 1,
    }
    graders = [
        {"key": "exact", "kind": "contains"},
        # Not gating: a judge version is created untrusted on import (trust never travels).
        {
            "key": "judge",
            "kind": "judge",
            "gating": False,
            "config": {"judge_version": f"{judge.uuid}"},
        },
    ]
    assay = folder / "assay"
    assay.mkdir()
    (assay / "target.json").write_text(json.dumps(target))
    (assay / "graders.json").write_text(json.dumps(graders))
    code, text = _exit_code(
        ["run_suite", "my-suite", "--name", "base", "--target", str(assay / "target.json"),
         "--graders", str(assay / "graders.json"), "--trials", "5", "--wait"]
    )  # fmt: skip
    assert code == 0, text
    run = Run.objects.get(name="base")
    code, text = _exit_code(["export_run", str(run.uuid), "--out", str(assay / "baseline.json")])
    assert code == 0, text
    stored = json.loads((assay / "baseline.json").read_text())["run"]["graders"]
    assert stored[1]["config"]["judge_version"] == str(judge.uuid)
    (assay / "graders.json").write_text(json.dumps(stored))  # as the exported run stores it
    # A fresh CI container: nothing of the server's database is there.
    Run.objects.all().delete()
    Suite.objects.all().delete()
    JudgeVersion.objects.all().delete()
    Judge.objects.all().delete()


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_docs_ci_flow_runs_as_written_and_the_gate_passes(mockllm, tmp_path, monkeypatch):  # noqa: F811
    server = mockllm("--latency-ms", "1")
    _server_baseline(tmp_path, server.base_url)
    monkeypatch.chdir(tmp_path)
    commands = _doc_commands()
    assert [c[0] for c in commands] == ["migrate", "import_run", "run_suite", "gate"]
    codes = {}
    for args in commands:
        code, text = _exit_code(args)
        codes[args[0]] = code
        assert code == 0, f"{shlex.join(args)} exited {code}: {text}"
    assert codes == {"migrate": 0, "import_run": 0, "run_suite": 0, "gate": 0}
    # The head was judged by the version the import created under the file's UUID and number.
    head = Run.objects.get(name="pr-42-abc123")
    version = JudgeVersion.objects.get()
    assert (version.judge.name, version.number) == ("helpful", 1)
    assert head.graders[1]["config"]["judge_version"] == str(version.uuid)
    judged = Grade.objects.filter(trial__run=head, grader="judge", judge_version=version)
    assert judged.filter(status=Grade.Status.OK, passed=True).count() == 15
    assert (tmp_path / "gate.md").read_text().strip()
