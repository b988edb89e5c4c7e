"""Benchmark: the CPU of one batch of results written by a chunk, by batch size.

A chunk writes the results that arrived meanwhile as one batch: the trials' lock and update
(``trial_results_record``), the run's counters, the deterministic grades
(``grades_insert``) and the stop check (``_stopped``), in one transaction. Its fixed cost
decides a worker's CPU per trial when batches are small (four workers sharing a run's calls
each write a quarter of the results).

A run of ``--cases`` × 5 trials (openai target, never called; one ``contains`` grader) is
started on a fresh PostgreSQL database (or the embedded SQLite with ``--sqlite``); for each
batch size its trials are claimed (``trials_claim``, untimed) and then written with made-up
results, ``--writes`` batches (default: max(20, 800 / size)). Printed per batch size: CPU-ms
per write and per trial (this process: psycopg and Django included, the database server not),
and wall ms per write.

Usage: .venv/bin/python bench/bench_result_write.py [--sizes 1,4,16,64] [--cases 2000]
       [--database assay_bench_write | --sqlite]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _cluster import database_fresh, environment, suite_make  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1,4,16,64")
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--writes", type=int, default=0)
    parser.add_argument("--database", default="assay_bench_write")
    parser.add_argument("--sqlite", action="store_true")
    args = parser.parse_args()
    database = None if args.sqlite else args.database
    os.environ.update(environment(database, ""))
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    database_fresh(database)

    from django.db import transaction  # noqa: PLC0415 - Django is set up above

    from evals.grading.ladder import grades_insert  # noqa: PLC0415
    from evals.models import Run, Trial  # noqa: PLC0415
    from evals.runner import start as start_module  # noqa: PLC0415
    from evals.runner.claims import trials_claim, trials_held  # noqa: PLC0415
    from evals.runner.execute import _stopped, trial_results_record  # noqa: PLC0415
    from evals.runner.targets import TargetResult  # noqa: PLC0415

    start_module._chunks_enqueue = lambda run_id, chunks: None  # nothing is called here
    suite = suite_make("bench-write", args.cases)
    run = start_module.run_start(
        suite=suite,
        name="write",
        target={
            "kind": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "model": "bench-model",
            "prompt_template": "$input",
            "concurrency": 64,
        },
        graders=[{"key": "contains", "kind": "contains"}],
        trials_per_case=5,
    )
    specs = list(Run.objects.get(id=run.id).grader_set.specs)
    ids = list(Trial.objects.filter(run=run).order_by("id").values_list("id", flat=True))
    prices: dict = {}  # one per chunk in the runner: priced once
    position = 0
    for size in [int(s) for s in args.sizes.split(",")]:
        writes = args.writes or max(20, 800 // size)
        if position + writes * size > len(ids):
            raise SystemExit(f"not enough trials for {writes} writes of {size}: raise --cases")
        batches = []
        for _ in range(writes):
            batch = ids[position : position + size]
            position += size
            trials_claim(run_id=run.id, trial_ids=batch)
            batches.append((batch, trials_held(batch)))
        cpu, wall = time.process_time(), time.perf_counter()
        for batch, held in batches:
            results = [
                (
                    trial_id,
                    TargetResult(
                        output="ANSWER " * 10,
                        raw_response={"id": "x", "choices": [{"message": {"content": "ANSWER"}}]},
                        input_tokens=20,
                        output_tokens=10,
                        latency_ms=200.0,
                        model="bench-model",
                        request={"model": "bench-model", "messages": [{"role": "user"}]},
                    ),
                )
                for trial_id in batch
            ]
            with transaction.atomic():
                trial_results_record(
                    run_id=run.id, model="bench-model", results=results, prices=prices
                )
                grades_insert(
                    items=[(t, held[t].case_input, r.output) for t, r in results], specs=specs
                )
            _stopped(run.id, set())
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        print(
            f"batch {size:3d}: {1000 * cpu / writes:6.2f} CPU-ms a write, "
            f"{1000 * cpu / (writes * size):6.3f} CPU-ms a trial, "
            f"{1000 * wall / writes:6.2f} ms wall a write ({writes} writes)",
            flush=True,
        )


if __name__ == "__main__":
    main()
