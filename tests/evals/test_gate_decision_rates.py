"""The gate's decision as users run it (``gate_evaluate``), by simulation: a fast version of
``bench/bench_gate.py`` (same code, seeded). Each evaluation runs the whole comparison
(exact permutation test, 10,000-draw bootstrap, detectable drop, pass^k): ~0.1–0.2 s on a
loaded 2-core machine, so a test affords 30–150 simulated comparisons to stay under 30 s.

A/A: head and base are the same pipeline (same per-case rates), so every exit 1 is a false
alarm; the bound is alpha = 5%, and a test fails when a cell is clearly above it: more than
9% (binomial: at 150 simulations a true 5% exceeds it with probability 0.02 and a true 15%
stays under it with probability 0.015; at 80, 0.05 and 0.07). Power: one regression case
that always passed now always fails must be caught in at least 85% (100 simulations: a true
75% would pass with probability 0.01). The full figures (2,000 a cell) are in
``bench/README.md``.
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
        ("regression", 12, 5, "all 0.9", 150),
        ("regression", 30, 5, "U(0.8,1)", 80),
        ("capability", 12, 5, "U(0,1)", 150),
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
    out = _simulate(bench, cell, 30)
    false_alarms = float(np.mean(out[:, 0] == 1))
    assert false_alarms <= 0.09, f"{cell.id}: {false_alarms:.1%} false alarms in 30"
    assert not np.any(out[:, 0] == 2)
    # Rounds were really run (suspects are common at U(0,1)), within the cap of 4N a side.
    assert out[:, 2].max() >= 1
    assert np.all(out[:, 1] <= 2 * 4 * 5 * 12)
    assert np.all(out[:, 1] >= 2 * 5 * 12)


def test_one_case_from_always_passing_to_always_failing_is_caught_at_12_by_5(bench):
    cell = bench.Cell("power", "regression", 12, 5, "U(0.8,1)", "none", "one 1.0->0.0")
    out = _simulate(bench, cell, 100)
    caught = float(np.mean(out[:, 0] == 1))
    assert caught >= 0.85, f"{cell.id}: caught {caught:.1%} of 100"
