"""Benchmark the best set of an experiment, fixed and raced, through ``stats.best_set.best_set``
and ``stats.racing.race_look`` (the functions the experiment page calls).

Grid: V in {2, 3, 5, 10} variants x C in {12, 30} cases x 5 trials per case, rate profiles

* ``equal``: every variant 0.7 on every case (a tie: variant 0 is the tagged best);
* ``equal90``: every variant 0.9 (a tie where whole cases often agree: racing's case rule
  bites);
* ``plus10`` / ``plus25``: variant 0 at 0.8 / 0.95, the others 0.7;
* ``hetero``: case difficulty p_c ~ Beta(3.5, 1.5); variant 0 gains 0.2 on a random half of
  the cases and loses 0.05 on the other half, each other variant gains 0.2 on a random
  quarter (drawn once per cell): variant 0 is best on average by a few points, others are
  better on some cases;
* ``hetero_tie``: p_c = 0.2 + 0.6 Beta(2, 2); each variant +0.15 on a random half of the
  cases and -0.15 on the other half: every mean equal (a tie), per-case rates differ.

Designs: ``fixed`` (5 trials, ``best_set`` at alpha = 0.05) and ``race`` (``racing_plan``:
3 rounds of 5 trials, look 0 at alpha/2; trials only on active variants and on the cases
``race_look`` names). Per cell: P(true best in set) with its Monte Carlo SE (the target is
>= 0.95), with ties P(every tied best kept), mean set size, P(set == {best}), mean trials.
For racing, ``fixed_n``: the smallest fixed trials per case (5, 10, 15, 20, 30, 40) whose
P(set == {best}) reaches racing's count (no allowance for Monte Carlo noise), with its
total, so racing's saving is read at equal power.

Edge cells (``--edges``): tiny suites (V 2 and 3 × C 1, 2 and 3) and grades that did not run:
a profile ending ``-nj`` leaves each trial not judged with probability 0.4 (a grade that
errored: out of both counts, as ``evals.experiments.decision`` counts it; a variant × case
left with no graded trial drops the case for every variant).

Usage:  nice -n 5 .venv/bin/python bench/bench_experiments.py [--reps 400] [--procs 2]
        .venv/bin/python bench/bench_experiments.py --cells '10x30/equal' --reps 1000
        .venv/bin/python bench/bench_experiments.py --quick          # ~1 minute
        .venv/bin/python bench/bench_experiments.py --report FILE    # Markdown from JSONL
Each cell is seeded from its id, so results do not depend on ``--procs``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import sys
import time
import zlib
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _mc import mc_rate_text  # noqa: E402

from stats.best_set import best_set  # noqa: E402
from stats.racing import race_look, racing_plan  # noqa: E402

VARIANTS = (2, 3, 5, 10)
CASES = (12, 30)
PROFILES = ("equal", "equal90", "plus10", "plus25", "hetero", "hetero_tie")
FIRST_TRIALS = 5
ALPHA = 0.05
PLAN = racing_plan(alpha=ALPHA, rounds=3, trials_per_round=5)
FIXED_N = (5, 10, 15, 20, 30, 40)
NOT_JUDGED = 0.4  # the chance a trial's grade did not run, in the "-nj" edge profiles
EDGE_JOBS = [(v, c, p) for v in (2, 3) for c in (1, 2, 3) for p in ("equal", "plus25")] + [
    (v, 12, p) for v in (2, 5) for p in ("equal-nj", "plus25-nj", "hetero-nj")
]


def _not_judged(profile: str) -> float:
    return NOT_JUDGED if profile.endswith("-nj") else 0.0


def _graded(shape, n: int, q: float, rng: np.random.Generator) -> np.ndarray:
    """Graded trials of ``n`` per cell when each is not judged with probability ``q``."""
    full = np.full(shape, n, dtype=np.int64)
    return full if q == 0 else rng.binomial(full, 1.0 - q).astype(np.int64)


def rates_for(profile: str, v: int, c: int, rng: np.random.Generator) -> np.ndarray:
    """True rates (V, C) of a profile; variant 0 is a (tagged) best."""
    profile = profile.removesuffix("-nj")
    if profile == "equal":
        return np.full((v, c), 0.7)
    if profile == "equal90":
        return np.full((v, c), 0.9)
    if profile in ("plus10", "plus25"):
        rates = np.full((v, c), 0.7)
        rates[0] = 0.8 if profile == "plus10" else 0.95
        return rates
    if profile == "hetero":
        p = np.clip(rng.beta(3.5, 1.5, size=c), 0.05, 0.95)
        rates = np.repeat(p[None, :], v, axis=0)
        half = rng.permutation(c) < c // 2
        rates[0] += np.where(half, 0.2, -0.05)
        for j in range(1, v):
            rates[j] += np.where(rng.permutation(c) < c // 4, 0.2, 0.0)
        return np.clip(rates, 0.0, 1.0)
    if profile == "hetero_tie":
        p = 0.2 + 0.6 * rng.beta(2, 2, size=c)
        signs = np.array([np.where(rng.permutation(c) < c // 2, 1.0, -1.0) for _ in range(v)])
        return p[None, :] + 0.15 * signs
    raise ValueError(profile)


def fixed_once(
    rates: np.ndarray, n: int, rng: np.random.Generator, q: float = 0.0
) -> tuple[tuple[int, ...], int]:
    graded = _graded(rates.shape, n, q, rng)
    passed = rng.binomial(graded, rates).astype(np.int64)
    try:
        kept = best_set(passed, graded, alpha=ALPHA).in_set_indices()
    except ValueError:  # every case dropped: nothing decided, every variant kept
        kept = tuple(range(rates.shape[0]))
    return kept, n * rates.size


def race_once(
    rates: np.ndarray, rng: np.random.Generator, q: float = 0.0
) -> tuple[tuple[int, ...], int, int]:
    """(final set, trials, looks) of one race driven as the experiment page drives it."""
    graded = _graded(rates.shape, FIRST_TRIALS, q, rng)
    passed = rng.binomial(graded, rates).astype(np.int64)
    trials = FIRST_TRIALS * rates.size
    active = None
    for look in range(PLAN.rounds + 1):
        try:
            result = race_look(PLAN, look, passed, graded, active_before=active)
        except ValueError:  # every case dropped: nothing decided yet, every variant kept
            return tuple(range(rates.shape[0])), trials, look + 1
        active = result.active
        if result.done:
            return active, trials, look + 1
        rows = np.array(active)[:, None]
        cols = np.array(result.cases)[None, :]
        added = _graded((len(active), len(result.cases)), PLAN.trials_per_round, q, rng)
        trials += PLAN.trials_per_round * added.size
        graded[rows, cols] += added
        passed[rows, cols] += rng.binomial(added, rates[rows, cols])
    raise AssertionError("the last look is always done")


def summarize(
    sets: list[tuple[int, ...]], trials: list[int], tied: tuple[int, ...], best: int
) -> dict:
    reps = len(sets)
    return {
        "reps": reps,
        "best_in": sum(best in s for s in sets),
        "all_tied_in": sum(all(t in s for t in tied) for s in sets),
        "size": float(np.mean([len(s) for s in sets])),
        "alone": sum(s == (best,) for s in sets),
        "trials": float(np.mean(trials)),
    }


def run_cell(args: tuple[int, int, str, int]) -> dict:
    v, c, profile, reps = args
    cell = f"{v}x{c}/{profile}"
    seed = zlib.crc32(cell.encode())
    rates = rates_for(profile, v, c, np.random.default_rng(seed))
    means = rates.mean(axis=1)
    best = int(np.argmax(means))
    tied = tuple(int(i) for i in np.flatnonzero(means >= means.max() - 1e-12))
    started = time.perf_counter()
    out = {"cell": cell, "v": v, "c": c, "profile": profile, "best": best, "tied": list(tied)}
    out["gap"] = float(means[best] - np.sort(means)[-2])
    q = _not_judged(profile)
    rng = np.random.default_rng(seed + 1)
    runs = [fixed_once(rates, FIRST_TRIALS, rng, q) for _ in range(reps)]
    out["fixed"] = summarize([r[0] for r in runs], [r[1] for r in runs], tied, best)
    rng = np.random.default_rng(seed + 2)
    races = [race_once(rates, rng, q) for _ in range(reps)]
    out["race"] = summarize([r[0] for r in races], [r[1] for r in races], tied, best)
    out["race"]["looks"] = float(np.mean([r[2] for r in races]))
    # Matched power: the fixed design reaches racing's count of P(set = {best}) (strictly: a
    # 399 of 400 against racing's 400 does not match; the table's reader judges the noise).
    target = out["race"]["alone"]
    out["fixed_n"] = None
    out["fixed_alone_by_n"] = {FIRST_TRIALS: out["fixed"]["alone"]}
    if len(tied) == 1 and out["fixed"]["alone"] >= target:
        out["fixed_n"] = FIRST_TRIALS
    elif len(tied) == 1:
        out["fixed_n"] = f">{FIXED_N[-1]}"
        for n in FIXED_N[1:]:
            rng = np.random.default_rng(seed + 3)  # common random numbers across n
            alone = sum(fixed_once(rates, n, rng, q)[0] == (best,) for _ in range(reps))
            out["fixed_alone_by_n"][n] = alone
            if alone >= target:
                out["fixed_n"] = n
                break
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def report(rows: list[dict]) -> str:
    lines = [
        "| V × C | profile (gap) | design | P(best in set) | every tied best kept | mean size "
        "| P(set = {best}) | trials | fixed trials/case at racing's P(set = {best}) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        tie = len(row["tied"]) > 1
        for design in ("fixed", "race"):
            d = row[design]
            reps = d["reps"]
            best_in = d["best_in"] / reps
            flag = " ⚠" if best_in < 0.95 - 2 * math.sqrt(0.95 * 0.05 / reps) else ""
            matched = ""
            if design == "race" and row["fixed_n"] is not None:
                n = row["fixed_n"]
                total = f"{row['v'] * row['c'] * n:,}" if isinstance(n, int) else "—"
                matched = f"{n} ({total} trials)"
            lines.append(
                f"| {row['v']} × {row['c']} | {row['profile']} ({row['gap']:+.3f}) | {design} "
                f"| {mc_rate_text(d['best_in'], reps)}{flag} "
                f"| {mc_rate_text(d['all_tied_in'], reps) if tie else '—'} "
                f"| {d['size']:.2f} | {mc_rate_text(d['alone'], reps) if not tie else '—'} "
                f"| {d['trials']:,.0f} | {matched} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="V 2 and 5, 12 cases, 100 reps")
    parser.add_argument("--edges", action="store_true", help="the edge cells only (module doc)")
    parser.add_argument("--out", default="")
    parser.add_argument(
        "--cells", nargs="*", default=[], help="fnmatch patterns over V x C/profile ids"
    )
    parser.add_argument("--report", default="", help="print the Markdown of a JSONL file")
    args = parser.parse_args()
    if args.report:
        rows = [json.loads(line) for line in Path(args.report).read_text().splitlines() if line]
        print(report(rows))
        return
    variants, cases, reps = VARIANTS, CASES, args.reps
    if args.quick:
        variants, cases, reps = (2, 5), (12,), 100
    jobs = [(v, c, p, reps) for v in variants for c in cases for p in PROFILES]
    if args.edges:
        jobs = [(v, c, p, reps) for v, c, p in EDGE_JOBS]
    if args.cells:
        jobs = [
            j for j in jobs if any(fnmatch.fnmatch(f"{j[0]}x{j[1]}/{j[2]}", c) for c in args.cells)
        ]
    jobs.sort(key=lambda j: -j[0] * j[1])  # the longest first
    started = time.time()
    rows = []
    with get_context("spawn").Pool(min(args.procs, 2)) as pool:
        for row in pool.imap_unordered(run_cell, jobs):
            rows.append(row)
            print(f"{row['cell']}: {row['seconds']} s", file=sys.stderr, flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(row) + "\n")
    order = {
        (v, c, p): i
        for i, (v, c, p, _) in enumerate(sorted(jobs, key=lambda j: (j[0], j[1], j[2])))
    }
    rows.sort(key=lambda r: order[(r["v"], r["c"], r["profile"])])
    print(report(rows))
    print(
        f"\n{len(rows)} cells, {reps} reps each, {time.time() - started:.0f} s, "
        f"load {os.getloadavg()[0]:.2f}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
