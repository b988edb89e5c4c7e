"""``manage.py gate``: every exit code, the Markdown and JSON outputs, files as base."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evals.baselines import baseline_set
from evals.models import Suite
from tests.comparison_builders import db_run, judge_version
from tests.conftest import PROJECT_DIR

pytestmark = pytest.mark.django_db

STEADY = {f"c{i}": "PPPF" for i in range(6)}


def gate(*args: str, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        call_command("gate", *args)
    return exit_info.value.code, capsys.readouterr().out


def test_it_exits_0_when_nothing_moved(capsys):
    v = judge_version(1)
    db_run(STEADY, name="B", version=v)
    db_run(STEADY, name="H", version=v)
    code, out = gate("--base", "S/B", "--head", "S/H", capsys=capsys)
    assert code == 0
    assert out.startswith("gate: no significant regression (exit 0)")
    assert "No measurable regression: no case did worse in head" in out
    # Discrete: with nothing moved, P(T <= t) holds the observed value's own mass.
    assert "the suite as a whole moved within noise (one-sided p = 0.62 at the first look)" in out


def test_it_exits_2_when_base_and_head_are_the_same_run(capsys):
    v = judge_version(1)
    db_run(STEADY, name="B", version=v)
    code, out = gate("--base", "S/B", "--head", "S/B", capsys=capsys)
    assert code == 2
    assert "base and head are the same run" in out


def test_it_exits_1_on_a_significant_regression_fault_d2(capsys):
    v = judge_version(1)
    db_run({f"c{i}": "P" for i in range(10)}, name="B", version=v, kind="capability")
    db_run({f"c{i}": "F" for i in range(10)}, name="H", version=v)
    code, out = gate("--base", "S/B", "--head", "S/H", capsys=capsys)
    assert code == 1
    assert "Blocked: the suite as a whole dropped beyond the pipeline's own randomness" in out
    assert "(one-sided p < 0.001 at the first look)" in out  # 1/1024
    assert "two-sided permutation p = 0.002 (exact)" in out  # 2/1024, fault D2
    assert "p = 0.000" not in out and "p = 0\n" not in out


def test_a_broken_case_within_noise_is_described_and_does_not_block(capsys):
    """One failure in four after four passes is what a 0.9 pipeline does by chance: it is
    named a "broken" case and a suspect, never a block by itself (issue 11)."""
    v = judge_version(1)
    db_run({**STEADY, "r": "PPPP"}, name="B", version=v, kind="regression")
    db_run({**STEADY, "r": "PPPF"}, name="H", version=v)
    code, out = gate("--base", "S/B", "--head", "S/H", capsys=capsys)
    assert code == 0
    assert "suspect: r: 4/4 -> 3/4" in out
    assert '("broken": r); that alone never blocks' in out


def test_it_exits_2_on_errored_trials_and_prints_why_fault_e1(capsys):
    v = judge_version(1)
    db_run({f"c{i}": "P" for i in range(20)}, name="B", version=v)
    verdicts = ["E"] * 3 + ["P"] * 13 + ["F"] * 4  # 3 judge calls rate-limited
    db_run({f"c{i}": verdicts[i] for i in range(20)}, name="H", version=v)
    code, out = gate("--base", "S/B", "--head", "S/H", capsys=capsys)
    assert code == 2
    assert "cannot decide" in out
    assert "head has 3 errored trial(s) of 20 (0 pipeline, 3 with an errored gating grade)" in out


def test_it_exits_2_on_an_unparseable_judge_reply_fault_a1(capsys):
    v = judge_version(1)
    db_run({"c1": "PPPP"}, name="B", version=v)
    db_run({"c1": "PPEF"}, name="R1", version=v)
    code, out = gate("--base", "S/B", "--head", "S/R1", capsys=capsys)
    assert code == 2
    assert "head has 1 errored trial(s) of 4" in out


def test_it_exits_2_without_overlapping_cases(capsys):
    v = judge_version(1)
    db_run({"a": "PP"}, name="B", version=v)
    db_run({"b": "PP"}, name="H", version=v)
    code, out = gate("--base", "S/B", "--head", "S/H", capsys=capsys)
    assert code == 2
    assert "no overlapping cases" in out


def test_it_exits_2_on_provisional_judge_grades_unless_allowed(capsys):
    v = judge_version(1, trusted=False)
    db_run(STEADY, name="B", version=v)
    db_run(STEADY, name="H", version=v)
    code, out = gate("--base", "S/B", "--head", "S/H", capsys=capsys)
    assert code == 2
    assert "provisional gating grade(s)" in out
    code, _ = gate("--base", "S/B", "--head", "S/H", "--allow-untrusted", capsys=capsys)
    assert code == 0


def test_it_exits_2_when_the_judge_version_changed_fault_k1(capsys, tmp_path):
    base = db_run({"c1": "P", "c2": "P", "c3": "P", "c4": "F"}, name="B", version=judge_version(1))
    db_run(
        {"c1": "P", "c2": "P", "c3": "P", "c4": "F", "c5": "F"}, name="C", version=judge_version(2)
    )
    md = tmp_path / "summary.md"
    code, out = gate(
        "--base", str(base.uuid), "--head", "S/C", "--json", "--markdown", str(md), capsys=capsys
    )
    assert code == 2
    data = json.loads(out)
    assert data["decision"]["reasons"] == [
        "judge version changed (judge-v1 → judge-v2): the runs are not comparable"
    ]
    h = data["comparison"]["headline"]
    assert (h["base_rate"], h["head_rate"], h["delta"], h["n_cases"]) == (0.75, 0.75, 0.0, 4)
    assert [c["key"] for c in data["comparison"]["added"]] == ["c5"]
    text = md.read_text()
    assert "judge version changed (judge-v1 → judge-v2)" in text
    assert "Only in head (1): `c5`" in text
    code, out = gate("--base", "S/B", "--head", "S/C", "--allow-incomparable", capsys=capsys)
    assert code == 2  # four cases x one trial: no head could be blocked
    assert "no head could be blocked" in out


def test_it_uses_the_suite_baseline_and_an_exported_file_as_base(capsys, tmp_path, carol):
    v = judge_version(1)
    base = db_run(STEADY, name="B", version=v)
    db_run({**STEADY, "c0": "FFFF", "c1": "FFFF", "c2": "FFFF"}, name="H", version=v)
    baseline_set(suite=Suite.objects.get(name="S"), run=base, by=carol)
    code, out = gate("--head", "S/H", "--json", capsys=capsys)
    assert code == 1
    from_db = json.loads(out)["comparison"]
    path = tmp_path / "baseline.json"
    call_command("export_run", "S/B", "--out", str(path))
    capsys.readouterr()
    code, out = gate("--base", str(path), "--head", "S/H", "--json", capsys=capsys)
    assert code == 1
    from_file = json.loads(out)["comparison"]
    assert from_file["headline"] == from_db["headline"]
    assert from_file["cases"] == from_db["cases"]


def test_it_refuses_an_unknown_run_with_a_code_that_is_not_regression():
    with pytest.raises(CommandError) as info:
        call_command("gate", "--head", "S/nope")
    assert info.value.returncode == 3


def test_a_malformed_argument_exits_3_not_2():

    root = PROJECT_DIR
    result = subprocess.run(
        [sys.executable, "manage.py", "gate", "--head", "x", "--alpha", "abc"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        env={**__import__("os").environ, "DEBUG": "true"},
    )
    assert result.returncode == 3
    assert "invalid float value" in result.stderr


@pytest.mark.parametrize(
    ("base", "head"),
    [
        ({"c1": "P", "c2": "P", "c3": "P"}, {"c1": "F", "c2": "F", "c3": "F"}),
        ({"c1": "P"}, {"c1": "F"}),
    ],
    ids=["three-cases-collapse", "one-case-1-of-1-to-0-of-1"],
)
def test_it_cannot_decide_on_a_collapse_no_head_could_be_blocked_on(capsys, base, head):
    v = judge_version(1)
    db_run(base, name="B", version=v)
    db_run(head, name="H", version=v)
    code, out = gate("--base", "S/B", "--head", "S/H", "--json", capsys=capsys)
    assert code == 2
    decision = json.loads(out)["decision"]
    assert decision["exit_code"] == 2 and decision["verdict"] == "cannot decide"
    assert "no head could be blocked" in decision["sentence"]
    assert "trials per case a side would make a block possible" in decision["sentence"]
