"""``manage.py run_experiment``: starts an experiment from a config file (or a JSON file), waits,
prints the decision and exits 0 decided, 1 undecided, 2 bad input, 3 a variant run failed or
was cancelled, the racing failed, or the timeout passed (docs/experiments.md). Celery is eager
here: the runs end before the command waits (the worker end to end:
tests/flows/test_experiment_worker.py)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evals.models import Experiment, Run, Suite, Trial
from tests.conftest import PROJECT_DIR
from tests.evals.test_worker import worker_queue  # noqa: F401 - a fixture

# transaction=True: on_commit fires for real, so the eager chunk tasks execute as in production.
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

EXAMPLE = PROJECT_DIR / "examples" / "experiment.toml"

TWINS = """
[suites.twins]
cases = [
  { key = "a", input = "a?", expected = "A" },
  { key = "b", input = "b?", expected = "B" },
  { key = "c", input = "c?", expected = "C" },
]

[experiments.twins]
suite = "twins"
graders = [{ key = "exact", kind = "exact" }]
trials_per_case = 3
seed = 11

[[experiments.twins.variants]]
label = "one"
target = { kind = "simulated", default_pass_probability = 0.6 }

[[experiments.twins.variants]]
label = "two"
target = { kind = "simulated", default_pass_probability = 0.6%s }
"""


def _run(*args: str) -> tuple[int, str]:
    """(exit code, stdout) of the command."""
    out = StringIO()
    try:
        call_command("run_experiment", *args, stdout=out, stderr=StringIO())
    except SystemExit as exit_:
        return int(exit_.code), out.getvalue()
    return 0, out.getvalue()


def _file(tmp_path, text: str, name: str = "exp.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_example_is_decided_exit_0_and_says_who_is_out(tmp_path):
    code, out = _run(str(EXAMPLE), "prompts", "--json")
    data = json.loads(out)
    assert code == 0 and data["exit_code"] == 0
    decision = data["decision"]
    assert decision["decided"] is True and decision["best"] == ["careful"]
    figures = {v["label"]: v for v in decision["variants"]}
    assert figures["careful"]["in_set"] and not figures["sloppy"]["in_set"]
    assert "careful" in figures["baseline"]["out_reason"]
    assert all(v["status"] == "succeeded" for v in data["variants"])
    assert Run.objects.count() == 3


def test_the_text_output_names_the_best_set_and_the_sentence():
    code, out = _run(str(EXAMPLE), "prompts")
    assert code == 0
    assert "best set: careful" in out
    assert "sloppy" in out and "out:" in out
    assert "method:" in out


def test_identical_variants_are_undecided_exit_1_and_say_what_would_settle_it(tmp_path):
    code, out = _run(str(_file(tmp_path, TWINS % "")), "twins", "--json")
    data = json.loads(out)
    assert code == 1 and data["exit_code"] == 1
    assert data["decision"]["decided"] is False
    assert data["decision"]["best"] == ["one", "two"]
    assert data["decision"]["sentence"]


def test_a_failed_variant_run_exits_3_with_the_decision_printed(tmp_path):
    code, out = _run(str(_file(tmp_path, TWINS % ", error_probability = 0.5")), "twins", "--json")
    data = json.loads(out)
    assert code == 3
    assert [v["status"] for v in data["variants"]] == ["succeeded", "failed"]
    assert data["decision"] is not None
    assert any("errored" in note for note in data["decision"]["notes"])


def test_a_timeout_exits_3_and_leaves_the_runs_going(tmp_path, worker_queue):  # noqa: F811
    # Not eager: the runs' messages wait on a queue no worker reads.
    code, out = _run(str(_file(tmp_path, TWINS % "")), "twins", "--timeout", "0.3")
    assert code == 3
    assert "timed out after 0.3 s" in out
    assert Experiment.objects.count() == 1
    assert set(Run.objects.values_list("status", flat=True)) == {"queued"}


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["prompts-typo"], "declares no experiment"),
        ([], "NAME"),
        (["prompts", "--settle", "9"], "--settle"),
        (["prompts", "--trials-per-round", "0"], "--trials-per-round"),
    ],
)
def test_bad_input_exits_2_and_starts_nothing(args, text):
    with pytest.raises(CommandError, match=text) as error:
        call_command("run_experiment", str(EXAMPLE), *args, stdout=StringIO())
    assert error.value.returncode == 2
    assert not Experiment.objects.exists() and not Run.objects.exists()
    assert not Suite.objects.exists()


def test_a_refused_field_exits_2_naming_its_toml_path(tmp_path):
    text = EXAMPLE.read_text(encoding="utf-8").replace("alpha = 0.05", "alpha = 0.9")
    out = StringIO()
    with pytest.raises(CommandError) as error:
        call_command("run_experiment", str(_file(tmp_path, text)), "prompts", "--json", stdout=out)
    assert error.value.returncode == 2
    assert json.loads(out.getvalue())["error"]["field"] == "experiments.prompts.alpha"
    assert not Suite.objects.exists()


def test_a_json_spec_file_names_its_suite_by_name(tmp_path):
    call_command("apply_config", str(EXAMPLE), stdout=StringIO())
    spec = {
        "suite": "faq",
        "name": "from-json",
        "variants": [
            {"label": "preset", "preset": "baseline"},
            {"label": "same", "preset": "baseline"},
        ],
        "grader_set": "exact",
        "trials_per_case": 2,
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    code, out = _run(str(path), "--json")
    assert code == 1  # the same preset twice: undecided
    assert json.loads(out)["name"] == "from-json"
    with pytest.raises(CommandError, match="NAME") as error:
        call_command("run_experiment", str(path), "extra", stdout=StringIO())
    assert error.value.returncode == 2
    path.write_text(json.dumps({**spec, "name": "x", "suite": "nope"}), encoding="utf-8")
    with pytest.raises(CommandError, match="no suite") as error:
        call_command("run_experiment", str(path), stdout=StringIO())
    assert error.value.returncode == 2


def test_settle_races_only_the_variants_still_in_the_set(tmp_path):
    """One round: the variants out at look 0 get no new trial; the set is the looks'
    intersection and racing is done."""
    text = EXAMPLE.read_text(encoding="utf-8").replace(
        "default_pass_probability = 0.97", "default_pass_probability = 0.6"
    )
    code, out = _run(
        str(_file(tmp_path, text)), "prompts", "--settle", "1", "--trials-per-round", "3", "--json"
    )
    data = json.loads(out)
    racing = data["racing"]
    assert racing["status"] == "done" and racing["rounds"] == 1
    first = racing["looks"][0]
    runs = {v["label"]: v for v in data["variants"]}
    labels = [v["label"] for v in data["variants"]]
    # At look 0 sloppy (p 0.1) is out; baseline (0.55) and careful (0.6) race on the cases
    # where their trials disagree.
    assert [labels[i] for i in first["active"]] == ["baseline", "careful"]
    assert first["cases"] > 0 and first["trials_added"] == 2 * first["cases"] * 3
    assert len(racing["looks"]) == 2 and racing["looks"][1]["done"]
    for position, label in enumerate(labels):
        trials = Trial.objects.filter(run__uuid=runs[label]["run"]).count()
        if position in first["active"] and first["cases"]:
            assert trials == 8 * 5 + first["cases"] * 3
        else:
            assert trials == 8 * 5  # out at look 0: nothing added
    assert set(data["decision"]["best"]) <= {labels[i] for i in first["in_set"]}
    assert code in (0, 1)
    assert code == (0 if data["decision"]["decided"] else 1)
