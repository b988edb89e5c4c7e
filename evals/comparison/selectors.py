"""Reading a comparison of two runs from the database: ``comparison_get``, what the comparison
page (through ``evals.comparison.cache``), the gate, the API and the exports call."""

from __future__ import annotations

from typing import Any

from core.gc_pause import gc_paused_call
from evals.comparison.compute import Comparison, comparison_compute
from evals.comparison.summary import run_summaries_get


@gc_paused_call
def comparison_get(
    *, base: Any, head: Any, alpha: float = 0.05, keys: dict[int, str | None] | None = None
) -> Comparison:
    """Load two runs and compare them (``comparison_compute``): finished runs from their stored
    summaries (``run_summaries_get``), others through the run loader. ``keys``: the runs'
    ``run_summary_keys`` when already read. About ten queries, none per case or trial."""
    reads = run_summaries_get(runs=[base, head], keys=keys, detectable_for=[base], alpha=alpha)
    return comparison_compute(
        base=reads[base.id].data,
        head=reads[head.id].data,
        alpha=alpha,
        detectable=reads[base.id].detectable[alpha],
        with_power=False,
    )
