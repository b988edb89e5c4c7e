"""The trust decision as leads meet it: how often a judge gets "trust_ok" by chance.

Every simulated calibration goes through ``labeling.trust_rule.trust_checks`` with the
default thresholds of ``labeling.trust_rule.trust_thresholds`` (what the calibration page,
``calibration_report``, the API and ``trust_grant`` use): labels are drawn for a judge of
known false-accept rate (FAR) and false-reject rate (FRR) on items of which a share are
human fails, then kappa (``stats.agreement.cohens_kappa``) and the FAR with its Wilson
interval (``false_accept_rate``) are computed as ``calibration_compute`` computes them.

Null rows (a judge that must not be trusted: FAR above the 10% threshold, up to the judge
that passes every wrong answer): the share trusted is the false-trust rate. Power rows
(a good judge): the share trusted. Monte Carlo SE beside each.

Pairwise judges go through ``labeling.pairwise.pairwise_calibration_figures`` (the pure
part of ``pairwise_calibration_compute``, which the page, ``calibration_report`` and
``judge_trust_approve`` call): per pair a human preference (A or B, half each), and a judge
that answers both presentation orders consistently with probability ``consistency`` (then
agreeing with the human with probability ``agree``) and otherwise picks the slot shown first
(an order flip: a tie). Nulls: kappa at its threshold (agree 0.8 on balanced preferences is
kappa 0.6), position consistency at its threshold (0.80), a judge that always prefers A, one
that always picks the first slot.

    DEBUG=false SECRET_KEY=bench-only .venv/bin/python bench/bench_trust.py [--sims 2000]
"""

from __future__ import annotations

import argparse
import os
import sys

import django
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# bench/ too, for _mc, also when a test loads this file by its path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from _mc import mc_rate_text  # noqa: E402

from labeling.pairwise import pairwise_calibration_figures  # noqa: E402
from labeling.trust_rule import trust_checks, trust_thresholds  # noqa: E402
from stats.agreement import cohens_kappa, false_accept_rate  # noqa: E402

# (label, true FAR, true FRR): nulls first, then good judges.
JUDGES = [
    ("passes every wrong answer", 1.0, 0.0),
    ("FAR 0.20", 0.20, 0.05),
    ("FAR 0.12 (just above 10%)", 0.12, 0.05),
    ("FAR 0.10 (at the threshold)", 0.10, 0.05),
    ("good: FAR 0.02, FRR 0.05", 0.02, 0.05),
    ("good: FAR 0.0, FRR 0.05", 0.0, 0.05),
]


def trusted(rng, *, n: int, fail_share: float, far: float, frr: float, th) -> bool:
    human = rng.random(n) >= fail_share  # True = pass
    u = rng.random(n)
    judge = np.where(human, u >= frr, u < far)
    judge, human = [bool(x) for x in judge], [bool(x) for x in human]
    kappa = cohens_kappa(judge, human)
    rate = false_accept_rate(judge, human)
    checks = trust_checks(
        n=n,
        human_fails=human.count(False),
        kappa=kappa,
        far=rate,
        far_weighted=None,
        th=th,
    )
    return all(c.ok for c in checks)


# (label, consistency, agree, always_a): nulls first, then good judges.
PAIRWISE_JUDGES = [
    ("always picks the first slot", 0.0, 1.0, False),
    ("always prefers A", 1.0, 0.0, True),
    ("kappa at 0.6 (agree 0.80), consistency 0.95", 0.95, 0.80, False),
    ("consistency at 0.80, agree 0.95", 0.80, 0.95, False),
    ("good: consistency 0.95, agree 0.95", 0.95, 0.95, False),
    ("good: consistency 0.90, agree 0.92", 0.90, 0.92, False),
]


def pairwise_trusted(rng, *, n: int, consistency: float, agree: float, always_a: bool, th) -> bool:
    """One simulated pairwise calibration of ``n`` labeled pairs through
    ``pairwise_calibration_figures``; True when the trust rule holds."""
    human = np.where(rng.random(n) < 0.5, "A", "B")
    consistent = rng.random(n) < consistency
    right = rng.random(n) < agree
    by_pair, prefs = {}, {}
    for i in range(n):
        h = str(human[i])
        if always_a:
            verdict = {"original": "A", "swapped": "A"}
        elif consistent[i]:
            v = h if right[i] else ("B" if h == "A" else "A")
            verdict = {"original": v, "swapped": v}
        else:  # the slot shown first, whatever it holds
            verdict = {"original": "A", "swapped": "B"}
        by_pair[i], prefs[i] = verdict, {h}
    return pairwise_calibration_figures(by_pair=by_pair, prefs=prefs, th=th).trust_ok


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sims", type=int, default=2000)
    args = parser.parse_args()
    th = trust_thresholds()
    print(f"thresholds: {th}")
    print("| judge | labels (40% human fails) | trusted % ± SE |")
    print("|---|---|---|")
    for label, far, frr in JUDGES:
        for n in (60, 100, 200):
            rng = np.random.default_rng(20261201)
            hits = sum(
                trusted(rng, n=n, fail_share=0.4, far=far, frr=frr, th=th) for _ in range(args.sims)
            )
            print(f"| {label} | {n} | {mc_rate_text(hits, args.sims, scale=100, digits=2)} |")
    print()
    print("| pairwise judge | labeled pairs | trusted % ± SE |")
    print("|---|---|---|")
    for label, consistency, agree, always_a in PAIRWISE_JUDGES:
        for n in (60, 100, 200):
            rng = np.random.default_rng(20261202)
            hits = sum(
                pairwise_trusted(
                    rng, n=n, consistency=consistency, agree=agree, always_a=always_a, th=th
                )
                for _ in range(args.sims)
            )
            print(f"| {label} | {n} | {mc_rate_text(hits, args.sims, scale=100, digits=2)} |")


if __name__ == "__main__":
    main()
