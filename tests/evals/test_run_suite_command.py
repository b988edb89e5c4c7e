"""manage.py run_suite: start a run, wait, exit 0 succeeded / 1 failed / 2 other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from config.celery import app
from evals.management.commands import run_suite
from evals.models import Case, Run, Suite, Trial

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
# transaction=True: on_commit fires for real, so the eager chunk tasks execute as in production.

GRADERS = [{"key": "nonempty", "kind": "regex", "config": {"pattern": "."}}]


@pytest.fixture
def suite() -> Suite:
    suite = Suite.objects.create(name="smoke")
    for i in range(4):
        Case.objects.create(suite=suite, key=f"c{i}", input=f"q{i}", expected="yes")
    return suite


def write_json(tmp_path, name, value):
    path = tmp_path / name
    path.write_text(json.dumps(value))
    return str(path)


def run_command(*args) -> tuple[int, str]:

    out = StringIO()
    try:
        call_command("run_suite", *args, stdout=out)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue()


def test_it_runs_a_simulated_suite_and_exits_0_when_it_succeeds(suite, tmp_path):
    graders = write_json(tmp_path, "g.json", GRADERS)
    code, out = run_command(
        "smoke",
        "--simulated",
        "--trials",
        "3",
        "--name",
        "n1",
        "--graders",
        graders,
        "--wait",
        "--json",
    )
    summary = json.loads(out)
    assert code == 0
    assert summary["status"] == "succeeded" and summary["name"] == "n1"
    assert (summary["trials_total"], summary["trials_finished"], summary["trials_errored"]) == (
        12,
        12,
        0,
    )
    assert Trial.objects.filter(run__name="n1").count() == 12


def test_it_exits_1_when_a_trial_errored(suite, tmp_path):
    target = write_json(
        tmp_path,
        "t.json",
        {"kind": "simulated", "seed": 1, "error_probability": 1.0},
    )
    graders = write_json(tmp_path, "g.json", GRADERS)
    code, out = run_command(
        "smoke", "--target", target, "--name", "n2", "--wait", "--graders", graders
    )
    assert code == 1
    assert "failed" in out and "20 of 20 trials errored" in out  # 4 cases x the default 5
    assert Run.objects.get(name="n2").status == Run.Status.FAILED


def test_it_exits_2_when_the_run_does_not_finish_in_time(suite, tmp_path, settings):

    saved = app.conf.task_always_eager
    app.conf.task_always_eager = False  # no worker listens: the run stays queued
    app.conf.task_default_queue, saved_queue = "assay-test-nobody", app.conf.task_default_queue
    try:
        code, out = run_command(
            "smoke",
            "--simulated",
            "--name",
            "n3",
            "--wait",
            "--timeout",
            "0.2",
            "--graders",
            write_json(tmp_path, "g.json", GRADERS),
        )
    finally:
        app.conf.task_always_eager = saved
        app.conf.task_default_queue = saved_queue
    assert code == 2
    assert "timed out" in out


def test_without_wait_it_only_starts_the_run(suite, tmp_path):
    graders = write_json(tmp_path, "g.json", GRADERS)
    code, out = run_command("smoke", "--simulated", "--name", "n4", "--graders", graders)
    assert code == 0
    assert "n4" in out


def test_runs_started_without_a_name_in_the_same_second_get_distinct_names(
    suite, tmp_path, monkeypatch
):
    # A CI matrix starts several runs of one suite at once: the default name never clashes.
    frozen = timezone.now().replace(microsecond=0)
    monkeypatch.setattr(timezone, "now", lambda: frozen)
    graders = write_json(tmp_path, "g.json", GRADERS)
    for _ in range(3):
        code, _out = run_command("smoke", "--simulated", "--graders", graders)
        assert code == 0
    stamp = frozen.strftime("run-%Y%m%d-%H%M%S")
    assert sorted(Run.objects.values_list("name", flat=True)) == [
        stamp,
        f"{stamp}-2",
        f"{stamp}-3",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "--simulated"], "SUITE: no suite named 'nope'"),
        (["smoke", "--simulated", "--trials", "0"], "trials_per_case"),
        (["smoke", "--simulated"], "graders: a run needs at least one grader"),
        (["smoke", "--target", "/no/such/file.json"], "--target: cannot read"),
    ],
)
def test_it_names_the_bad_argument(suite, args, message):
    with pytest.raises(CommandError, match=message.replace(".", r"\.")):
        call_command("run_suite", *args)


def test_it_names_the_bad_field_of_a_target_or_grader_file(suite, tmp_path):
    bad_target = write_json(tmp_path, "t.json", {"kind": "simulated"})
    with pytest.raises(CommandError, match="target.seed"):
        call_command("run_suite", "smoke", "--target", bad_target)
    bad_graders = write_json(tmp_path, "g.json", [{"key": "x", "kind": "nope"}])
    with pytest.raises(CommandError, match=r"graders\[0\]\.kind"):
        call_command("run_suite", "smoke", "--simulated", "--graders", bad_graders)
    not_json = tmp_path / "broken.json"
    not_json.write_text("{oops")
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("run_suite", "smoke", "--target", str(not_json))
    assert Run.objects.count() == 0


def test_its_import_path_loads_neither_pandas_nor_scipy(tmp_path):
    # The command that waits stays small (issue 17): Django set up and the command loaded, as
    # `manage.py run_suite ... --wait` does, in a fresh interpreter (this one has them).
    code = (
        "import sys, django; django.setup(); "
        "import evals.management.commands.run_suite; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'scipy'}))"
    )

    assert _fresh_python(code, tmp_path) == "[]"


def _fresh_python(code: str, tmp_path, *, unset: tuple[str, ...] = ()) -> str:
    """Run ``code`` in a fresh interpreter with the project's settings (DEBUG, no Redis, the
    registries an operator might list rather than the tests' own, ``unset`` removed from the
    environment); its stdout, stripped. Fails on a non-zero exit."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "true",
        "ASSAY_REGISTRIES": "demo.registry,examples.registry",
        "ASSAY_VAR_DIR": str(tmp_path),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    env.pop("REDIS_URL", None)
    for name in unset:
        env.pop(name, None)

    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )

    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("suite_name", "expected_code"),
    [("smoke", 0), ("no-such-suite", 1)],
)
def test_from_the_command_line_it_leaves_at_once_with_its_exit_code(
    suite, tmp_path, monkeypatch, suite_name, expected_code
):
    # run_from_argv (manage.py's path) ends the process with os._exit once done; stub it.
    left: list[int] = []
    monkeypatch.setattr(run_suite, "_exit_now", left.append)
    graders = write_json(tmp_path, "g.json", GRADERS)

    run_suite.Command().run_from_argv(
        ["manage.py", "run_suite", suite_name, "--simulated", "--graders", graders, "--json"]
    )

    assert left == [expected_code]


def test_a_workers_import_path_loads_neither_pandas_nor_scipy(tmp_path):
    # What a Celery worker imports before its first task: Django, the tasks of every app
    # (Celery's autodiscovery, with its Django fixup's start-up steps) and the runner.
    code = (
        "import sys, django; django.setup(); "
        "from config.celery import app; app.loader.import_default_modules(); "
        "import evals.runner.execute, judges.tasks; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'scipy'}))"
    )

    assert _fresh_python(code, tmp_path, unset=("CELERY_SKIP_CHECKS",)) == "[]"


def test_a_ready_worker_has_imported_what_closing_a_run_needs(tmp_path):
    # A run's close stores its summary (scipy); imported at the first close instead, it held
    # a solo worker ~0.7 s while the next run waited for its first call (bench_start.py).
    code = (
        "import sys, django; django.setup(); "
        "from evals.apps import worker_warm_up; worker_warm_up(); "
        "print(sorted(m for m in ('evals.comparison.summary', 'evals.runner.execute', "
        "'judges.tasks', 'aiohttp', 'scipy') if m in sys.modules))"
    )

    assert _fresh_python(code, tmp_path) == str(
        ["aiohttp", "evals.comparison.summary", "evals.runner.execute", "judges.tasks", "scipy"]
    )
