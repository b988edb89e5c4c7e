"""Coverage of the intervals Assay shows for a pass rate (not part of the test suite).

Three intervals, each simulated over this grid: cases C in {3, 5, 12,
30} × trials per case k in {1, 3, 5, 10} × per-case rate profiles

    0.5      every case's true rate 0.5
    0.9      every case 0.9
    U        spread: each case's rate drawn once from U(0.2, 1) (seeded per cell), then fixed
    0.02     near 0
    0.98     near 1
    1.0      every case always passes (the truth is 1: does the interval still hold it?)

1. **Run / slice interval** (``stats.intervals.clustered_rate_interval``, Korn–Graubard).
   Estimand: the suite's mean case rate μ = (1/C) Σ p_i with the **cases fixed** (only the
   trials are random: each case's passes ~ Binomial(k, p_i)). A slice is the same interval
   over the cases carrying one tag, i.e. a suite of fewer cases: C = 3 and 5 are the slice
   cells. One extra row per (C, k), "U sampled", redraws the cases every simulation from
   U(0.2, 1) and takes the population mean 0.6 as the truth (cases as a sample, the "in
   general" reading).
2. **Corrected interval** (``stats.correction.corrected_rate_interval``, Rogan–Gladen with
   MOVER). A judge with known TPR 0.90 and TNR 0.85 grades every trial (a truly passing trial
   is passed with probability TPR, a truly failing one with 1 − TNR); its calibration counts
   are drawn afresh each simulation from a calibration of 30 labels (20 human passes, 10
   human fails) and of 100 labels (70 / 30). Estimand: the same μ of the *true* (human)
   rates, cases fixed. An undefined result (the calibration makes TPR + TNR <= 1) counts as
   a miss.
3. **Comparison, on this suite** (``stats.compare.within_case_interval``, Newcombe hybrid
   score on Kish-effective pooled counts). Estimand: δ = (1/C) Σ (p_hi − p_bi), cases fixed,
   for base → head profiles 0.5 → 0.5, 0.9 → 0.9, U → U, U → U − 0.2 (clipped at 0), 1.0 → 0.0,
   0.98 → 0.02, 1.0 → 1.0.

4. **pass^k and pass@k** (``stats.passk.pass_hat_k_interval`` / ``pass_at_k_interval``:
   Korn–Graubard on disjoint blocks of k trials). C in {3, 5, 12, 30} × trials per case n in
   {3, 5, 10} × k in {1, 2, 3, n} × the six profiles, cases fixed: the truth is
   (1/C) Σ p_i^k and 1 − (1/C) Σ (1 − p_i)^k; plus "U sampled" (cases redrawn from U(0.2, 1)
   each simulation; truth the population values E[p^k] = (1 − 0.2^(k+1)) / (0.8 (k + 1)) and
   1 − E[(1 − p)^k] = 1 − 0.8^k / (k + 1)). ``--passk-sims`` simulations per cell (2,000 by
   default: a few minutes on the 2-core machine).

Every interval is 95%. Coverage is the share of simulations whose interval holds the truth,
with its Monte Carlo SE sqrt(c(1 − c)/sims); width is the mean of high − low. A cell fails
when coverage < 0.95 − 2 SE (or a width is 0); the script then exits 1.

Usage: python bench/bench_intervals.py [--sims 2000] [--passk-sims 2000] [--seed 20261201]
    [--part all|rates|comparison|passk]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# bench/ too, for _mc, also when a test loads this file by its path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _mc import mc_rate_text  # noqa: E402

from stats.compare import within_case_interval_from_counts  # noqa: E402
from stats.correction import corrected_rate_interval  # noqa: E402
from stats.intervals import clustered_rate_interval  # noqa: E402
from stats.passk import (  # noqa: E402
    pass_at_k,
    pass_at_k_interval_from_estimates,
    pass_hat_k,
    pass_hat_k_interval_from_estimates,
)

CASES = (3, 5, 12, 30)
TRIALS = (1, 3, 5, 10)
PROFILES = ("0.5", "0.9", "U", "0.02", "0.98", "1.0")
TPR, TNR = 0.90, 0.85
CALIBRATIONS = ((20, 10), (70, 30))  # (human passes, human fails)
PAIRS = (
    ("0.5", "0.5"),
    ("0.9", "0.9"),
    ("U", "U"),
    ("U", "U-0.2"),
    ("1.0", "0.0"),
    ("0.98", "0.02"),
    ("1.0", "1.0"),
)


def rates(profile: str, n_cases: int, rng: np.random.Generator) -> np.ndarray:
    """Per-case true rates of a profile ("U": drawn from U(0.2, 1) with ``rng``)."""
    if profile == "U":
        return rng.uniform(0.2, 1.0, n_cases)
    return np.full(n_cases, float(profile))


class Cell:
    """Coverage and width counters of one interval in one cell."""

    def __init__(self) -> None:
        self.hits = 0
        self.n = 0
        self.width = 0.0
        self.zero_width = 0

    def add(self, low: float | None, high: float | None, truth: float) -> None:
        self.n += 1
        if low is None or high is None:
            return
        self.hits += low - 1e-12 <= truth <= high + 1e-12
        self.width += high - low
        self.zero_width += not high > low

    @property
    def coverage(self) -> float:
        return self.hits / self.n

    @property
    def se(self) -> float:
        c = self.coverage
        return math.sqrt(max(c * (1 - c), 0.0) / self.n)

    @property
    def ok(self) -> bool:
        return self.coverage >= 0.95 - 2 * self.se and not self.zero_width

    def text(self) -> str:
        flag = "" if self.ok else " **FAIL**"
        return f"{mc_rate_text(self.hits, self.n)} ({self.width / self.n:.3f}){flag}"


def run_cell(n_cases, trials, profile, sims, rng, *, sampled=False):
    """Raw and corrected intervals over ``sims`` simulated runs of one cell."""
    fixed = rates(profile, n_cases, rng)
    graded = np.full(n_cases, trials)
    raw, corrected = Cell(), [Cell() for _ in CALIBRATIONS]
    for _ in range(sims):
        p = rates(profile, n_cases, rng) if sampled else fixed
        truth = 0.6 if sampled else float(p.mean())
        passed = rng.binomial(trials, p)
        r = clustered_rate_interval(passed, graded)
        raw.add(r.ci_low, r.ci_high, truth)
        if sampled:
            continue
        judge_passed = rng.binomial(trials, TPR * p + (1 - TNR) * (1 - p))
        for cell, (n_pass, n_fail) in zip(corrected, CALIBRATIONS, strict=True):
            tp, tn = int(rng.binomial(n_pass, TPR)), int(rng.binomial(n_fail, TNR))
            c = corrected_rate_interval(
                judge_passed, graded, tp=tp, fn=n_pass - tp, tn=tn, fp=n_fail - tn
            )
            cell.add(c.ci_low, c.ci_high, truth)
    return raw, corrected


def run_pair(n_cases, trials, base_profile, head_profile, sims, rng):
    """The within-case comparison interval over ``sims`` simulated pairs of runs."""
    p_b = rates(base_profile, n_cases, rng)
    if head_profile == "U-0.2":
        p_h = np.clip(p_b - 0.2, 0.0, 1.0)
    elif head_profile == "U":
        p_h = p_b.copy()
    else:
        p_h = rates(head_profile, n_cases, rng)
    truth = float((p_h - p_b).mean())
    graded = np.full(n_cases, trials)
    cell = Cell()
    for _ in range(sims):
        low, high = within_case_interval_from_counts(
            graded, rng.binomial(trials, p_b), graded, rng.binomial(trials, p_h)
        )
        cell.add(low, high, truth)
    return cell


PASSK_TRIALS = (3, 5, 10)


def passk_ks(trials: int) -> list[int]:
    """k in {1, 2, 3, n}, each once."""
    return sorted({1, 2, 3, trials})


def run_passk_cell(n_cases, trials, k, profile, sims, rng, *, sampled=False):
    """(pass^k cell, pass@k cell) over ``sims`` simulated runs of one cell."""
    fixed = rates(profile, n_cases, rng)
    graded = np.full(n_cases, trials)
    hat_table = np.array([pass_hat_k(trials, c, k) for c in range(trials + 1)])
    at_table = np.array([pass_at_k(trials, c, k) for c in range(trials + 1)])
    hat_cell, at_cell = Cell(), Cell()
    for _ in range(sims):
        p = rates(profile, n_cases, rng) if sampled else fixed
        if sampled:
            hat_truth = (1 - 0.2 ** (k + 1)) / (0.8 * (k + 1))
            at_truth = 1 - 0.8**k / (k + 1)
        else:
            hat_truth = float((p**k).mean())
            at_truth = 1 - float(((1 - p) ** k).mean())
        passed = rng.binomial(trials, p)
        r = pass_hat_k_interval_from_estimates(hat_table[passed], graded, k)
        hat_cell.add(r.ci_low, r.ci_high, hat_truth)
        r = pass_at_k_interval_from_estimates(at_table[passed], graded, k)
        at_cell.add(r.ci_low, r.ci_high, at_truth)
    return hat_cell, at_cell


def passk_tables(sims: int, seed: int) -> list[tuple]:
    """Print the pass^k and pass@k coverage tables; return the failing cells."""
    failures = []
    rows = {"pass^k": [], "pass@k": []}
    lowest = {"pass^k": (2.0, None), "pass@k": (2.0, None)}
    for n_cases in CASES:
        for trials in PASSK_TRIALS:
            for k in passk_ks(trials):
                cells = {"pass^k": [], "pass@k": []}
                for i, profile in enumerate((*PROFILES, "U sampled")):
                    rng = np.random.default_rng([seed, n_cases, trials, k, 300 + i])
                    hat, at = run_passk_cell(
                        n_cases,
                        trials,
                        k,
                        "U" if profile == "U sampled" else profile,
                        sims,
                        rng,
                        sampled=profile == "U sampled",
                    )
                    cells["pass^k"].append(hat)
                    cells["pass@k"].append(at)
                for name, row in cells.items():
                    failures += [(name, n_cases, trials, k, c.text()) for c in row if not c.ok]
                    for c, profile in zip(row, (*PROFILES, "U sampled"), strict=True):
                        if c.coverage < lowest[name][0]:
                            lowest[name] = (c.coverage, (n_cases, trials, k, profile, c.se))
                    rows[name].append(
                        f"| {n_cases} | {trials} | {k} | "
                        + " | ".join(c.text() for c in row)
                        + " |"
                    )
    for name, lines in rows.items():
        print(
            f"\n## {name} interval ({name.replace('^', '_hat_').replace('@', '_at_')}"
            f"_interval), {sims} sims per cell"
        )
        print(
            "coverage ± Monte Carlo SE (mean width); truth: the cases' own mean (U sampled: "
            "the population's)"
        )
        print("| C | n | k | " + " | ".join(PROFILES) + " | U sampled |")
        print("|---|---|---|" + "---|" * (len(PROFILES) + 1))
        print("\n".join(lines))
    for name, (coverage, where) in lowest.items():
        print(f"lowest {name} coverage {coverage:.3f} (C, n, k, profile, SE) = {where}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=2000)
    parser.add_argument("--passk-sims", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument(
        "--part",
        choices=("all", "rates", "comparison", "passk"),
        default="all",
        help="tables to run",
    )
    args = parser.parse_args()
    start = time.perf_counter()
    failures = []
    header = "| C | k | " + " | ".join(PROFILES) + " | U sampled |"
    rule = "|---|---|" + "---|" * (len(PROFILES) + 1)
    raw_rows, corrected_rows = [], [[] for _ in CALIBRATIONS]
    if args.part == "passk":
        failures = passk_tables(args.passk_sims, args.seed)
        print(f"\n{len(failures)} failing cells; {time.perf_counter() - start:.0f} s")
        for failure in failures:
            print("FAIL", *failure)
        return 1 if failures else 0
    for n_cases in CASES if args.part != "comparison" else ():
        for trials in TRIALS:
            raw_cells, corr_cells = [], [[] for _ in CALIBRATIONS]
            for i, profile in enumerate(PROFILES):
                rng = np.random.default_rng([args.seed, n_cases, trials, i])
                raw, corrected = run_cell(n_cases, trials, profile, args.sims, rng)
                raw_cells.append(raw)
                for j, cell in enumerate(corrected):
                    corr_cells[j].append(cell)
            rng = np.random.default_rng([args.seed, n_cases, trials, 99])
            sampled, _ = run_cell(n_cases, trials, "U", args.sims, rng, sampled=True)
            raw_cells.append(sampled)
            for name, cells in [("run", raw_cells), *(("corrected", c) for c in corr_cells)]:
                failures += [(name, n_cases, trials, c.text()) for c in cells if not c.ok]
            raw_rows.append(
                f"| {n_cases} | {trials} | " + " | ".join(c.text() for c in raw_cells) + " |"
            )
            for j, cells in enumerate(corr_cells):
                corrected_rows[j].append(
                    f"| {n_cases} | {trials} | " + " | ".join(c.text() for c in cells) + " |"
                )
    if args.part != "comparison":
        print(f"## Run and slice interval (clustered_rate_interval), {args.sims} sims per cell")
        print("coverage ± Monte Carlo SE (mean width); truth: mean of the cases' own rates")
        print(header)
        print(rule)
        print("\n".join(raw_rows))
    for (n_pass, n_fail), rows in zip(CALIBRATIONS, corrected_rows, strict=True):
        if args.part == "comparison":
            break
        print(
            f"\n## Corrected interval (corrected_rate_interval), judge TPR {TPR} TNR {TNR}, "
            f"calibration {n_pass + n_fail} labels ({n_pass} pass / {n_fail} fail)"
        )
        print("| C | k | " + " | ".join(PROFILES) + " |")
        print("|---|---|" + "---|" * len(PROFILES))
        print("\n".join(rows))
    names = [f"{b} → {h}" for b, h in PAIRS]
    if args.part == "all":
        failures += passk_tables(args.passk_sims, args.seed)
    if args.part not in ("rates", "passk"):
        print(f"\n## Comparison on this suite (within_case_interval), {args.sims} sims per cell")
        print("| C | k | " + " | ".join(names) + " |")
        print("|---|---|" + "---|" * len(PAIRS))
    for n_cases in CASES if args.part not in ("rates", "passk") else ():
        for trials in TRIALS:
            cells = []
            for i, (b, h) in enumerate(PAIRS):
                rng = np.random.default_rng([args.seed, n_cases, trials, 200 + i])
                cells.append(run_pair(n_cases, trials, b, h, args.sims, rng))
            failures += [("comparison", n_cases, trials, c.text()) for c in cells if not c.ok]
            print(f"| {n_cases} | {trials} | " + " | ".join(c.text() for c in cells) + " |")
    print(f"\n{len(failures)} failing cells; {time.perf_counter() - start:.0f} s")
    for failure in failures:
        print("FAIL", *failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
