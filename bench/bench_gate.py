"""Benchmark the gate's decision as users run it: false alarms (A/A), "cannot decide", trials
spent and power, through ``evals.comparison.gate.gate_evaluate``.

Every simulated comparison builds a base and a head ``RunData`` (Bernoulli trials at the
cases' true pass rates) and calls ``gate_evaluate`` — the function ``manage.py gate``, the
comparison page and ``POST /api/gate`` call — so every rule that can exit 1 is counted
(comparison_compute's figures are computed too, as for a user). With top-up the rounds are
driven as ``evals.comparison.topup`` drives them: the plan is fixed at the start
(``gate_plan(top_up=True)``: base replayed, rounds N then 2N, cap 4N), and while the
verdict is "undecided" each case named in ``decision.next_round`` gets the (base, head)
trials it asks for as a new look; then ``gate_evaluate`` again, until pass, block or
cannot decide. Adaptive runs (``run_suite --against``) use this same machinery
(``adaptive_start`` -> ``top_up_start`` with the default plan), so their figures are the
top-up ones.

Usage (no database is touched):
    .venv/bin/python bench/bench_gate.py                      # everything, 2,000 sims a cell
    .venv/bin/python bench/bench_gate.py --table aa --sims 400 --cells 'regression/12x5/*'
    .venv/bin/python bench/bench_gate.py --table power --out bench/gate_power.jsonl
    .venv/bin/python bench/bench_gate.py --list               # cell ids, nothing run
    .venv/bin/python bench/bench_gate.py --report bench/gate_power.jsonl   # Markdown tables

Cell ids: A/A ``aa/<kind>/<cases>x<trials>/<profile>/<mode>``; power
``power/<scenario>/<kind>/<cases>x<trials>/<profile>/<mode>`` (profile = the other cases'
rates). ``--cells`` takes fnmatch patterns over the ids (several allowed, any match runs).
``--out`` appends one JSON line per finished cell; with ``--resume`` cells already in that
file are skipped, so a long grid can be run in pieces. ``--procs`` (default 2, at most 2:
the machine is shared) worker processes; each cell's simulations are split into chunks
seeded from the cell id and the chunk number, so results do not depend on ``--procs``.

A/A false-alarm check: a cell is flagged when its rate of exit 1 is above 5% + 2 SE, the SE
being the Monte Carlo standard error of a rate of exactly 5% at the cell's simulation count
(0.49 points at 2,000).
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
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# bench/ too, for _mc, also when a test loads this file by its path.
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from _mc import mc_rate_text  # noqa: E402

from evals.comparison.gate import TOP_UP_VERDICTS, gate_evaluate, gate_plan  # noqa: E402
from evals.comparison.run_data import CaseData, GraderInfo, RunData  # noqa: E402

ALPHA = 0.05
KINDS = ("regression", "capability")
CASES = (5, 12, 30, 100)
TRIALS = (3, 5, 10)
PROFILES = ("all 1.0", "all 0.99", "all 0.95", "all 0.9", "U(0.8,1)", "U(0,1)")
MODES = ("none", "top-up")
# The small cells add "first-look": replayable runs gated without --top-up (a top-up plan,
# its first look only), as `manage.py gate` decides server-side runs when not asked to top up.
SMALL_MODES = (*MODES, "first-look")
MODE_NAMES = {"none": "no top-up", "top-up": "top-up", "first-look": "first look, no top-up run"}
# The edge cells: suites so small that no head may be blockable (exit 2, "cannot decide").
SMALL_CASES = (1, 2, 3, 5)
SMALL_TRIALS = (1, 2, 3)
SMALL_PROFILES = ("all 1.0", "all 0.9", "U(0.8,1)")
GRADERS = (GraderInfo("check", True),)
CHUNK = 50  # simulations per task handed to a worker


def profile_rates(profile: str, cases: int, rng: np.random.Generator) -> np.ndarray:
    """Per-case true pass rates of one simulated suite, shape (cases,), drawn once per
    suite (the same for base and head)."""
    if profile.startswith("all "):
        return np.full(cases, float(profile[4:]))
    if profile == "U(0.8,1)":
        return rng.uniform(0.8, 1.0, cases)
    if profile == "U(0,1)":
        return rng.uniform(0.0, 1.0, cases)
    raise ValueError(f"unknown profile {profile!r}")


# --- power scenarios: (base rates, head rates) from the other cases' profile ----------------


def _one_to(rate: float):
    def make(base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        base = base.copy()
        base[0] = 1.0
        head = base.copy()
        head[0] = rate
        return base, head

    return make


def _three_to(rate: float):
    def make(base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        base = base.copy()
        base[:3] = 1.0
        head = base.copy()
        head[:3] = rate
        return base, head

    return make


def _spread_drop(points: float):
    def make(base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # Proportional to each case's rate, so the mean falls by exactly ``points``
        # (as stats.power does); needs a mean of at least ``points``.
        mean = float(base.mean())
        return base, base * (1 - min(points, mean) / mean) if mean > 0 else base

    return make


def _seed_example(base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # docs/statistics.md: 12 cases x 5, three cases 5/5 -> 0/5, the suite 88.3% -> 66.7%:
    # the other nine at 38/45 in base and 40/45 in head.
    b = np.full(base.size, 38 / 45)
    h = np.full(base.size, 40 / 45)
    b[:3], h[:3] = 1.0, 0.0
    return b, h


SCENARIOS = {
    "one 1.0->0.0": _one_to(0.0),
    "one 1.0->0.5": _one_to(0.5),
    "three 1.0->0.7": _three_to(0.7),
    "10-pt drop spread": _spread_drop(0.10),
    "seed example": _seed_example,
    "every case 1.0->0.0": lambda base: (np.ones(base.size), np.zeros(base.size)),
}
# (scenario, kind, cases, trials): the power table's rows; each with every profile of the
# other cases (the seed example fixes its own rates) and both modes.
POWER_ROWS = (
    ("one 1.0->0.0", "regression", 12, 5),
    ("one 1.0->0.0", "regression", 30, 5),
    ("one 1.0->0.5", "regression", 30, 5),
    ("three 1.0->0.7", "regression", 12, 5),
    ("three 1.0->0.7", "regression", 30, 5),
    ("10-pt drop spread", "regression", 30, 5),
    ("10-pt drop spread", "capability", 30, 5),
    ("seed example", "regression", 12, 5),
    ("seed example", "capability", 12, 5),
)
# The small-suite power rows: every case collapses, or one does (the others at the profile).
SMALL_POWER_SCENARIOS = ("every case 1.0->0.0", "one 1.0->0.0")


@dataclass(frozen=True)
class Cell:
    table: str  # "aa" or "power"
    kind: str
    cases: int
    trials: int
    profile: str
    mode: str
    scenario: str = ""

    @property
    def id(self) -> str:
        shape = f"{self.cases}x{self.trials}"
        if self.table == "aa":
            return f"aa/{self.kind}/{shape}/{self.profile}/{self.mode}"
        return f"power/{self.scenario}/{self.kind}/{shape}/{self.profile}/{self.mode}"


def all_cells() -> list[Cell]:
    cells = [
        Cell("aa", kind, c, n, profile, mode)
        for kind in KINDS
        for c in CASES
        for n in TRIALS
        for profile in PROFILES
        for mode in MODES
    ]
    cells += [
        Cell("aa", "regression", c, n, profile, mode)
        for c in SMALL_CASES
        for n in SMALL_TRIALS
        for profile in SMALL_PROFILES
        for mode in SMALL_MODES
    ]
    cells += [
        Cell("power", "regression", c, n, profile, mode, scenario)
        for scenario in SMALL_POWER_SCENARIOS
        for c in SMALL_CASES
        for n in SMALL_TRIALS
        for profile in (("all 1.0",) if scenario.startswith("every") else ("all 0.9",))
        for mode in SMALL_MODES
    ]
    for scenario, kind, c, n in POWER_ROWS:
        profiles = ("all 1.0",) if scenario == "seed example" else PROFILES
        for profile in profiles:
            for mode in MODES:
                cells.append(Cell("power", kind, c, n, profile, mode, scenario))
    return list(dict.fromkeys(cells))  # the small cells repeat a few of the grid's


# --- one simulated comparison through gate_evaluate ------------------------------------------


def _run(name: str, kind: str, n: int, looks: list[list[tuple[int, int]]]) -> RunData:
    cases = []
    for i, case_looks in enumerate(looks):
        verdicts: list[bool] = []
        for passed, graded in case_looks:
            verdicts += [True] * passed + [False] * (graded - passed)
        cases.append(
            CaseData(
                key=f"case-{i:03d}",
                content_hash=f"{i:064x}",
                tags=(),
                verdicts=tuple(verdicts),
                trials=len(verdicts),
                finished=len(verdicts),
                looks=tuple(case_looks),
            )
        )
    return RunData(
        label=f"bench / {name}",
        uuid="",
        name=name,
        suite_name="bench",
        suite_kind=kind,
        status="succeeded",
        trials_per_case=n,
        graders=GRADERS,
        cases=tuple(cases),
        source="bench",
    )


def simulate_comparison(
    *,
    kind: str,
    trials: int,
    base_rates: np.ndarray,
    head_rates: np.ndarray,
    mode: str,
    rng: np.random.Generator,
) -> tuple[int, int, int]:
    """One comparison: (exit code, trials executed on both sides, top-up rounds run).
    Look 0: ``trials`` Bernoulli trials a case a side; ``mode`` "top-up": the rounds asked
    for by ``decision.next_round`` (as ``evals.comparison.topup.top_up_advance`` adds them);
    "first-look": the top-up plan's first decision, no round run; "none": no top-up plan."""
    n = trials
    plan = (
        gate_plan(alpha=ALPHA, trials_per_case=n, suite_kind=kind, top_up=True)
        if mode in ("top-up", "first-look")
        else None
    )
    base_looks = [[(int(b), n)] for b in rng.binomial(n, base_rates)]
    head_looks = [[(int(h), n)] for h in rng.binomial(n, head_rates)]
    spent = 2 * n * base_rates.size
    rounds = 0
    index = {f"case-{i:03d}": i for i in range(base_rates.size)}
    while True:
        _, decision = gate_evaluate(
            head=_run("head", kind, n, head_looks),
            base=_run("base", kind, n, base_looks),
            alpha=ALPHA,
            plan=plan,
        )
        if decision.verdict not in TOP_UP_VERDICTS or mode == "first-look":
            return decision.exit_code, spent, rounds
        rounds += 1
        for key, (mb, mh) in decision.next_round.items():
            i = index[key]
            if mb:
                base_looks[i].append((int(rng.binomial(mb, base_rates[i])), mb))
            head_looks[i].append((int(rng.binomial(mh, head_rates[i])), mh))
            spent += mb + mh


def _cell_seed(cell_id: str) -> int:
    return zlib.crc32(cell_id.encode("utf-8"))


def run_chunk(task: tuple[Cell, int, int]) -> tuple[str, np.ndarray]:
    """Simulate ``count`` comparisons of ``cell`` (chunk ``chunk``, seeded from the cell id
    and the chunk number). Returns (cell id, array (count, 3): exit code, trials, rounds)."""
    cell, chunk, count = task
    rng = np.random.default_rng([_cell_seed(cell.id), chunk])
    out = np.zeros((count, 3), dtype=np.int64)
    for s in range(count):
        rates = profile_rates(cell.profile, cell.cases, rng)
        if cell.table == "aa":
            base, head = rates, rates
        else:
            base, head = SCENARIOS[cell.scenario](rates)
        out[s] = simulate_comparison(
            kind=cell.kind,
            trials=cell.trials,
            base_rates=base,
            head_rates=head,
            mode=cell.mode,
            rng=rng,
        )
    return cell.id, out


def summarise(cell: Cell, results: np.ndarray, seconds: float) -> dict:
    """Figures of one cell: rates of exit 1 and 2 with Monte Carlo SEs, mean trials per case
    (both sides, look 0 included), mean rounds, and the A/A flag."""
    n = len(results)
    exit1 = float(np.mean(results[:, 0] == 1))
    exit2 = float(np.mean(results[:, 0] == 2))
    row = {
        "id": cell.id,
        **{k: getattr(cell, k) for k in ("table", "kind", "cases", "trials", "profile", "mode")},
        "scenario": cell.scenario,
        "sims": n,
        "exit1": exit1,
        "exit1_se": math.sqrt(exit1 * (1 - exit1) / n),
        "exit2": exit2,
        "exit2_se": math.sqrt(exit2 * (1 - exit2) / n),
        "trials_per_case": float(results[:, 1].mean() / cell.cases),
        "rounds": float(results[:, 2].mean()),
        "seconds": round(seconds, 1),
    }
    if cell.table == "aa":
        bound = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / n)
        row["bound"] = bound
        row["flag"] = exit1 > bound
    return row


def _line(row: dict) -> str:
    text = (
        f"{row['id']:<60} exit1 {_pct(row['exit1'], row['exit1_se'], row['sims'])}%"
        f"  exit2 {100 * row['exit2']:.2f}%  trials/case {row['trials_per_case']:6.2f}"
        f"  ({row['sims']} sims, {row['seconds']} s)"
    )
    if row.get("flag"):
        text += f"  FLAG: above 5% + 2 SE = {100 * row['bound']:.2f}%"
    return text


def _pct(rate: float, se: float, n: int) -> str:
    """Rate % ± Monte Carlo SE; at 0 or n events the exact one-sided 95% bound instead
    (``_mc.mc_rate_text``), never a zero-width figure. ``se`` is recomputed from the count."""
    return mc_rate_text(round(rate * n), n, scale=100, digits=2)


def report(rows: list[dict]) -> str:
    """Markdown tables of finished cells (``--out`` lines): A/A per kind and mode (cell:
    exit-1 rate % ± SE, exit-2 rate, mean trials per case both sides), then power."""
    out = []
    aa = [r for r in rows if r["table"] == "aa"]
    for kind in KINDS:
        for mode in SMALL_MODES:
            mine = [r for r in aa if r["kind"] == kind and r["mode"] == mode]
            if not mine:
                continue
            out.append(f"\n**A/A, {kind}, {MODE_NAMES[mode]}**\n")
            out.append(
                "| cases × trials | profile | sims | exit 1 % ± SE | exit 2 % | trials/case |"
            )
            out.append("|---|---|---|---|---|---|")
            order = {p: i for i, p in enumerate(PROFILES)}
            for r in sorted(mine, key=lambda r: (r["cases"], r["trials"], order[r["profile"]])):
                flag = " **above 5% + 2 SE**" if r.get("flag") else ""
                out.append(
                    f"| {r['cases']} × {r['trials']} | {r['profile']} | {r['sims']} | "
                    f"{_pct(r['exit1'], r['exit1_se'], r['sims'])}{flag} | "
                    f"{_pct(r['exit2'], r['exit2_se'], r['sims'])} | "
                    f"{r['trials_per_case']:.1f} |"
                )
    power = [r for r in rows if r["table"] == "power"]
    if power:
        out.append("\n**Power (share of comparisons that exit 1; exit 2: cannot decide)**\n")
        out.append(
            "| scenario | kind | cases × trials | other cases | mode | sims "
            "| exit 1 % ± SE (95% bound) | exit 2 % | trials/case |"
        )
        out.append("|---|---|---|---|---|---|---|---|---|")
        for r in power:
            mode = {"none": "no top-up", "top-up": "top-up / adaptive"}.get(
                r["mode"], MODE_NAMES[r["mode"]]
            )
            others = "9 at 38/45 → 40/45" if r["scenario"] == "seed example" else r["profile"]
            out.append(
                f"| {r['scenario']} | {r['kind']} | {r['cases']} × {r['trials']} | "
                f"{others} | {mode} | {r['sims']} | {_pct(r['exit1'], r['exit1_se'], r['sims'])} | "
                f"{_pct(r['exit2'], r['exit2_se'], r['sims'])} | {r['trials_per_case']:.1f} |"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", choices=("aa", "power", "both"), default="both")
    parser.add_argument("--sims", type=int, default=2000, help="simulations per cell")
    parser.add_argument("--cells", action="append", default=[], help="fnmatch pattern(s)")
    parser.add_argument("--procs", type=int, default=2, choices=(1, 2))
    parser.add_argument("--out", type=Path, help="append one JSON line per finished cell")
    parser.add_argument("--resume", action="store_true", help="skip cells already in --out")
    parser.add_argument("--list", action="store_true", help="print the cell ids and stop")
    parser.add_argument("--report", type=Path, help="print Markdown tables of a --out file")
    args = parser.parse_args(argv)
    if args.report:
        lines = args.report.read_text(encoding="utf-8").splitlines()
        print(report([json.loads(line) for line in lines if line]))
        return 0
    cells = [c for c in all_cells() if args.table in ("both", c.table)]
    if args.cells:
        cells = [c for c in cells if any(fnmatch.fnmatchcase(c.id, p) for p in args.cells)]
    if args.resume and args.out and args.out.exists():
        done = {json.loads(line)["id"] for line in args.out.read_text().splitlines() if line}
        cells = [c for c in cells if c.id not in done]
    if args.list:
        print("\n".join(c.id for c in cells))
        return 0
    by_id = {c.id: c for c in cells}
    tasks = []
    for cell in cells:
        for chunk, start in enumerate(range(0, args.sims, CHUNK)):
            tasks.append((cell, chunk, min(CHUNK, args.sims - start)))
    print(f"{len(cells)} cell(s), {args.sims} simulations each, {args.procs} process(es)")
    parts: dict[str, list[np.ndarray]] = {}
    started = {c.id: None for c in cells}
    flagged = []
    t0 = time.perf_counter()

    def take(cell_id: str, out: np.ndarray) -> None:
        parts.setdefault(cell_id, []).append(out)
        if started[cell_id] is None:
            started[cell_id] = time.perf_counter()
        if sum(len(p) for p in parts[cell_id]) == args.sims:
            row = summarise(by_id[cell_id], np.concatenate(parts.pop(cell_id)), 0.0)
            row["seconds"] = round(time.perf_counter() - t0, 1)
            print(_line(row), flush=True)
            if row.get("flag"):
                flagged.append(row["id"])
            if args.out:
                with args.out.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(row) + "\n")

    if args.procs == 1:
        for task in tasks:
            take(*run_chunk(task))
    else:
        with get_context("fork").Pool(args.procs) as pool:
            for cell_id, out in pool.imap(run_chunk, tasks):
                take(cell_id, out)
    print(f"done in {time.perf_counter() - t0:.0f} s (seconds per cell are since the start)")
    if flagged:
        print(f"A/A cells above 5% + 2 SE: {len(flagged)}: " + ", ".join(flagged))
    else:
        print("A/A cells above 5% + 2 SE: none")
    return 1 if flagged else 0


if __name__ == "__main__":
    raise SystemExit(main())
