"""A cache in front of ``evals.comparison.compute.comparison_get`` for the comparison pages.

Why: the comparison of two finished runs is a pure, seeded function of their trials and
grades, and computing it for 2,000 cases x 5 trials took seconds (the former bootstrap and the exact
permutation p; bench/RESULTS-comparison-page.md), while filtering, sorting and paging the
case table re-request the same comparison many times.

Invariant: the cache key holds everything the result depends on that can change — both
runs' UUIDs and status, ``alpha``, and a fingerprint of their trials and grades (counts,
largest ids, verdict counts) and of judge trust — so a new trial, a new or regraded grade or
a newly trusted judge version misses the cache; a run that is not finished is never cached.
The gate command computes without the cache and gets the same result
(tests/evals/test_views_comparison.py checks they agree).
"""

from __future__ import annotations

from django.core.cache import cache
from django.db import models

from core.gc_pause import gc_paused_call
from evals.comparison.compute import Comparison, comparison_get
from evals.models import Grade, Run, Trial
from judges.models import JudgeApproval

COMPARISON_CACHE_SECONDS = 3600


def _fingerprint(base: Run, head: Run) -> str:
    """Counts and largest ids of the two runs' trials and grades, their finished trials,
    passing and errored grades (a regrade in place changes a verdict count), and the number
    of trusted judge versions (trust turns provisional grades into gating ones); three
    queries."""

    runs = [base.id, head.id]
    t = Trial.objects.filter(run_id__in=runs).aggregate(
        n=models.Count("id"),
        top=models.Max("id"),
        done=models.Count("id", filter=models.Q(status__in=Trial.FINISHED)),
    )
    g = Grade.objects.filter(trial__run_id__in=runs).aggregate(
        n=models.Count("id"),
        top=models.Max("id"),
        ok=models.Count("id", filter=models.Q(passed=True)),
        err=models.Count("id", filter=models.Q(status=Grade.Status.ERROR)),
    )
    # Every grant and revocation writes an approval row: its count and newest change move.
    trust = JudgeApproval.objects.aggregate(
        n=models.Count("id"), top=models.Max("id"), revoked=models.Count("revoked_at")
    )
    trusted = f"{trust['n']}.{trust['top']}.{trust['revoked']}"
    return f"{t['n']}.{t['top']}.{t['done']}.{g['n']}.{g['top']}.{g['ok']}.{g['err']}.{trusted}"


@gc_paused_call
def comparison_cached_get(*, base: Run, head: Run, alpha: float = 0.05) -> Comparison:
    """``comparison_get(base=, head=, alpha=)``, cached for ``COMPARISON_CACHE_SECONDS``
    when both runs are finished (module docstring); three extra queries per call. The
    collector is paused throughout (``core.gc_pause``): a cached comparison of 2,000 cases
    unpickles into ~28,000 tracked objects, and loading it took 42 ms of CPU with the
    collector running against 18 ms paused (24 ms after ``gc.freeze()``, as under WSGI)."""
    if not (base.is_terminal and head.is_terminal):
        return comparison_get(base=base, head=head, alpha=alpha)
    key = (
        f"assay:comparison:v1:{base.uuid}:{base.status}:{head.uuid}:{head.status}:{alpha}:"
        f"{_fingerprint(base, head)}"
    )
    hit = cache.get(key)
    if hit is not None:
        return hit
    value = comparison_get(base=base, head=head, alpha=alpha)
    cache.set(key, value, COMPARISON_CACHE_SECONDS)
    return value
