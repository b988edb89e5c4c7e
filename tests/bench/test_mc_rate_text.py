"""The benchmarks' Monte Carlo rates (``bench/_mc.py``) never print a zero-width error: at 0
or n hits the exact one-sided 95% bound, 1 − 0.05^(1/n), stands in for the zero SE."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "bench_mc", Path(__file__).resolve().parents[2] / "bench" / "_mc.py"
)
_mc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mc)


@pytest.mark.parametrize(
    ("hits", "n", "scale", "digits", "text"),
    [
        (2000, 2000, 1.0, 3, "1.000 (≥ 0.998)"),  # 1 - 0.05^(1/2000) = 0.001497
        (0, 2000, 100, 2, "0.00 (≤ 0.15)"),
        (0, 400, 100, 2, "0.00 (≤ 0.75)"),  # 0.7461% rounded up, never down
        (1999, 2000, 1.0, 3, "1.000 ± 0.001"),  # SE 0.0004999 rounds up, not to 0.000
        (1906, 2000, 1.0, 3, "0.953 ± 0.005"),
        (24, 400, 100, 2, "6.00 ± 1.19"),
    ],
)
def test_a_rate_prints_with_an_error_that_is_never_zero(hits, n, scale, digits, text):
    assert _mc.mc_rate_text(hits, n, scale=scale, digits=digits) == text


@pytest.mark.parametrize(("hits", "n"), [(-1, 10), (11, 10), (0, 0)])
def test_an_impossible_count_is_refused(hits, n):
    with pytest.raises(ValueError, match="0 <= hits <= n"):
        _mc.mc_rate_text(hits, n)
