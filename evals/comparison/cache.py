"""A cache in front of ``evals.comparison.selectors.comparison_get`` for the comparison pages.

Why: the comparison of two finished runs is a pure, seeded function of their trials and
grades, and computing it for 2,000 cases x 5 trials took seconds (the former bootstrap and the exact
permutation p; bench/RESULTS-comparison-page.md), while filtering, sorting and paging the
case table re-request the same comparison many times.

Invariant: the cache key holds everything the result depends on that can change — both
runs' UUIDs, ``alpha``, and both runs' summary keys (``evals.comparison.summary
.run_summary_keys``: the runs' fingerprints, ``evals.fingerprint``: status, grader set,
trials, grades and their verdicts; judge trust; case changes) — so a new trial, a new or
regraded grade, a newly trusted judge version or a retagged case misses the cache; a run
that is not finished is never cached. On a miss the comparison reads the runs' stored
summaries (the same keys), so even a first view of a pair reads no trial. The gate command
computes without the cache and gets the same result (tests/evals/test_views_comparison.py
checks they agree).
"""

from __future__ import annotations

import hashlib

from django.core.cache import cache

from core.gc_pause import gc_paused_call
from evals.comparison.compute import Comparison
from evals.comparison.selectors import comparison_get
from evals.comparison.summary import run_summary_keys
from evals.models import Run

COMPARISON_CACHE_SECONDS = 3600


@gc_paused_call
def comparison_cached_get(*, base: Run, head: Run, alpha: float = 0.05) -> Comparison:
    """``comparison_get(base=, head=, alpha=)``, cached for ``COMPARISON_CACHE_SECONDS``
    when both runs are finished (module docstring); three extra queries per call (the
    keys). The collector is paused throughout (``core.gc_pause``): a cached comparison of
    2,000 cases unpickles into ~28,000 tracked objects, and loading it took 42 ms of CPU
    with the collector running against 18 ms paused (24 ms after ``gc.freeze()``, as under
    WSGI)."""
    if not (base.is_terminal and head.is_terminal):
        return comparison_get(base=base, head=head, alpha=alpha)
    keys = run_summary_keys(runs=[base, head])
    digest = hashlib.sha256(f"{keys[base.id]}|{keys[head.id]}".encode()).hexdigest()[:32]
    key = f"assay:comparison:v3:{base.uuid}:{head.uuid}:{alpha}:{digest}"
    hit = cache.get(key)
    if hit is not None:
        return hit
    value = comparison_get(base=base, head=head, alpha=alpha, keys=keys)
    cache.set(key, value, COMPARISON_CACHE_SECONDS)
    return value
