"""The gate's decision as users run it (``gate_evaluate``), by simulation: a fast version of
``bench/bench_gate.py`` (same code, a few hundred simulated comparisons a cell, seeded).

A/A: head and base are the same pipeline (same per-case rates), so every exit 1 is a false
alarm; the bound is alpha = 5%, and a test fails when a cell is clearly above it (9%: with
200–300 simulations a true 5% lies above 9% with probability under 1%). Power: one
regression case that always passed now always fails must be caught.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_gate", ROOT / "bench" / "bench_gate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_gate"] = module
    spec.loader.exec_module(module)
    return module


def _simulate(bench, cell, sims: int) -> np.ndarray:
    """(sims, 3) array: exit code, trials on both sides, top-up rounds; seeded by chunk 7."""
    _, out = bench.run_chunk((cell, 7, sims))
    return out


@pytest.mark.parametrize(
    ("kind", "cases", "trials", "profile", "sims"),
    [
        ("regression", 12, 5, "all 0.9", 300),
        ("regression", 30, 5, "U(0.8,1)", 200),
        ("capability", 12, 5, "U(0,1)", 300),
    ],
)
def test_same_pipeline_twice_rarely_blocks_without_top_up(
    bench, kind, cases, trials, profile, sims
):
    cell = bench.Cell("aa", kind, cases, trials, profile, "none")
    out = _simulate(bench, cell, sims)
    false_alarms = float(np.mean(out[:, 0] == 1))
    assert false_alarms <= 0.09, f"{cell.id}: {false_alarms:.1%} false alarms in {sims}"
    assert not np.any(out[:, 0] == 2)  # nothing errored: the gate can always decide
    assert np.all(out[:, 1] == 2 * trials * cases)  # no top-up: the runs' own trials only
    assert np.all(out[:, 2] == 0)


def test_same_pipeline_twice_rarely_blocks_with_top_up(bench):
    cell = bench.Cell("aa", "regression", 12, 5, "U(0,1)", "top-up")
    out = _simulate(bench, cell, 100)
    false_alarms = float(np.mean(out[:, 0] == 1))
    assert false_alarms <= 0.09, f"{cell.id}: {false_alarms:.1%} false alarms in 100"
    assert not np.any(out[:, 0] == 2)
    # Rounds were really run (suspects are common at U(0,1)), within the cap of 4N a side.
    assert out[:, 2].max() >= 1
    assert np.all(out[:, 1] <= 2 * 4 * 5 * 12)
    assert np.all(out[:, 1] >= 2 * 5 * 12)


def test_one_case_from_always_passing_to_always_failing_is_caught_at_12_by_5(bench):
    cell = bench.Cell("power", "regression", 12, 5, "U(0.8,1)", "none", "one 1.0->0.0")
    out = _simulate(bench, cell, 200)
    caught = float(np.mean(out[:, 0] == 1))
    assert caught >= 0.85, f"{cell.id}: caught {caught:.1%} of 200"
