"""Benchmark: a run sits just under a provider's rate limit with any number of workers
(the global limit per target).

The shared mock plays a provider with ``--rpm 6000 --max-inflight 128`` at 200 ms; a run of
200 cases x 30 trials (6,000 calls, about a minute at the limit) at target concurrency 64 is
executed by 4 Celery workers (``--pool solo``) on PostgreSQL + Redis, the shared limiter in
Redis. Twice: with ``rpm: 6000`` declared on the target, and with no rpm (learnt from the
429s' ``x-ratelimit-limit-requests``). Then a run of 200 x 5 at ``concurrency: 64`` with 2
workers against the mock without an rpm limit: the mock's highest number in flight must not
pass 64.

``--provider anthropic`` runs the same scenarios on the mock's Anthropic endpoint
(``/v1/messages``, a target with ``"provider": "anthropic"``; its 429s carry
``anthropic-ratelimit-requests-*`` headers, from which the limit is learnt); a list
(``openai,anthropic``) runs each in turn, each row naming its provider.

Per run: wall seconds from ``run_start`` to the run's end; the achieved rate (calls answered
200 per minute over the mock's span, first request to last response, and over the wall); 429s
drawn (the mock's ``limited``) as a share of all requests; the mock's highest in flight; the
run's passes against the mock's own count of pass answers (equal when nothing is lost or
doubled); the load average.

Usage: .venv/bin/python bench/bench_rate_limit.py [--redis redis://127.0.0.1:6379/5]
       [--database assay_bench_rate_limit] [--trials 30] [--chunk 100] [--json]
       [--provider openai,anthropic] [--only declared,learnt,c64]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _cluster import (
    CASES,
    DEFAULT_MOCK,
    PROVIDER_TARGETS,
    Mock,
    Workers,
    database_fresh,
    environment,
    load_average,
)
from _cluster import suite_make as suite_make_


def run_once(suite, mock: Mock, *, provider: str, trials: int, target_extra: dict) -> dict:
    from evals.models import Grade, Trial
    from evals.runner.start import run_start

    mock.reset()
    t0 = time.perf_counter()
    run = run_start(
        suite=suite,
        name=f"rate-{time.time_ns()}",
        target=mock.target(provider=provider, concurrency=64, **target_extra),
        graders=[{"key": "exact", "kind": "exact"}],
        trials_per_case=trials,
    )
    timeline, next_look = [], time.perf_counter()
    while True:
        run.refresh_from_db()
        if run.is_terminal and run.finished_at is not None:
            break
        if time.perf_counter() >= next_look:  # the 429s drawn so far, every 5 s
            seen = mock.stats()
            timeline.append(seen["limited"]["rpm"] + seen["limited"]["inflight"])
            next_look += 5.0
        time.sleep(0.1)
    wall = time.perf_counter() - t0
    stats = mock.stats()
    answered = stats["status"].get("200", 0)
    on_api = mock.api_stats(provider)["requests"]
    assert on_api == stats["requests"], (provider, on_api, stats["requests"])
    limited = stats["limited"]["rpm"] + stats["limited"]["inflight"]
    return {
        "status": run.status,
        "calls_answered": answered,
        "requests": stats["requests"],
        "wall_s": round(wall, 2),
        "rpm_span": round(answered / stats["span_s"] * 60, 0) if stats["span_s"] else None,
        "rpm_wall": round(answered / wall * 60, 0),
        "limited_429": limited,
        "limited_share_pct": round(100 * limited / max(1, stats["requests"]), 3),
        "max_in_flight": stats["max_inflight"],
        "passes": Grade.objects.filter(trial__run=run, grader="exact", passed=True).count(),
        "mock_passes": stats["outcomes"]["pass"],
        "errored": Trial.objects.filter(run=run, status=Trial.Status.ERROR).count(),
        "load": load_average(),
        "limited_every_5s": timeline,
    }


def measure(provider: str, args, suite, workers: Workers, only: set, report) -> None:
    """The scenarios of ``only`` on ``provider``'s endpoint, each row to ``report``."""
    limited = Mock(args.mock, 200, ("--rpm", "6000", "--max-inflight", "128"))
    try:
        for i in range(4):
            workers.worker(i)
        for name, extra in (("declared", {"rpm": 6000}), ("learnt", {})):
            if name not in only:
                continue
            # each its own endpoint state: nothing learnt by the previous run
            extra = {**extra, "limit_key": f"bench-{name}-{time.time_ns()}"}
            row = run_once(
                suite, limited, provider=provider, trials=args.trials, target_extra=extra
            )
            report(
                {"scenario": f"rpm 6000, {name}", "provider": provider, "workers": 4,
                 "cases": CASES, **row}
            )  # fmt: skip
    finally:
        limited.stop()
        workers.stop_all()
    if "c64" in only:
        free = Mock(args.mock, 200, ("--max-inflight", "128"))
        try:
            for i in range(2):
                workers.worker(i)
            row = run_once(
                suite, free, provider=provider, trials=5,
                target_extra={"limit_key": f"bench-c64-{time.time_ns()}"},
            )  # fmt: skip
            report(
                {"scenario": "C=64, no rpm", "provider": provider, "workers": 2, "cases": CASES,
                 **row}
            )  # fmt: skip
        finally:
            free.stop()
            workers.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/5")
    parser.add_argument("--database", default="assay_bench_rate_limit")
    parser.add_argument("--mock", default=str(DEFAULT_MOCK))
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--chunk", type=int, default=100)
    parser.add_argument("--only", default="declared,learnt,c64")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--provider", default="openai", help="openai, anthropic or both, comma")
    args = parser.parse_args()
    providers = args.provider.split(",")
    unknown = set(providers) - set(PROVIDER_TARGETS)
    if unknown:
        parser.error(f"unknown provider {sorted(unknown)[0]!r}")

    env = environment(args.database, args.redis, {"ASSAY_TRIAL_CHUNK_SIZE": str(args.chunk)})
    database_fresh(args.database)
    from django.conf import settings

    from config.celery import app

    settings.ASSAY["TRIAL_CHUNK_SIZE"] = args.chunk
    app.control.purge()
    suite = suite_make_()
    logs = Path(tempfile.mkdtemp(prefix="assay-bench-rate-"))
    workers = Workers(env, "celery", logs)
    rows = []
    only = set(args.only.split(","))

    def report(row: dict) -> None:
        rows.append(row)
        if not args.json:
            print(json.dumps(row), flush=True)

    try:
        for provider in providers:
            measure(provider, args, suite, workers, only, report)
        if args.json:
            print(json.dumps(rows, indent=2))
    finally:
        workers.stop_all()


if __name__ == "__main__":
    main()
