"""The trust decision as users meet it (fast version of bench/bench_trust.py): simulated
labels for judges of known FAR through ``trust_checks`` with the default thresholds."""

from __future__ import annotations

import numpy as np
import pytest

from labeling.pairwise import pairwise_calibration_figures
from labeling.selectors import trust_checks, trust_thresholds
from stats.agreement import cohens_kappa, false_accept_rate


def share_trusted(*, far: float, frr: float, n: int, sims: int = 300) -> float:
    th = trust_thresholds()
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(sims):
        human = [bool(x) for x in rng.random(n) >= 0.4]
        u = rng.random(n)
        judge = [bool(u[i] >= frr) if h else bool(u[i] < far) for i, h in enumerate(human)]
        checks = trust_checks(
            n=n,
            human_fails=human.count(False),
            kappa=cohens_kappa(judge, human),
            far=false_accept_rate(judge, human),
            far_weighted=None,
            th=th,
        )
        hits += all(c.ok for c in checks)
    return hits / sims


@pytest.mark.django_db
def test_a_judge_that_passes_every_wrong_answer_is_never_trusted():
    assert share_trusted(far=1.0, frr=0.0, n=200) == 0


@pytest.mark.django_db
def test_a_judge_at_the_far_threshold_is_rarely_trusted():
    assert share_trusted(far=0.10, frr=0.05, n=200) <= 0.05


@pytest.mark.django_db
def test_a_good_judge_is_trusted_with_enough_labels():
    assert share_trusted(far=0.0, frr=0.05, n=200) >= 0.9


def share_pairwise_trusted(*, consistency: float, agree: float, n: int, sims: int = 300) -> float:
    """Simulated pairwise calibrations of ``n`` labeled pairs (balanced human preferences)
    through ``pairwise_calibration_figures``: the judge answers both orders consistently with
    probability ``consistency`` (then agrees with the human with probability ``agree``), and
    otherwise picks the slot shown first."""
    th = trust_thresholds()
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(sims):
        by_pair, prefs = {}, {}
        for i in range(n):
            h = "A" if rng.random() < 0.5 else "B"
            if rng.random() < consistency:
                v = h if rng.random() < agree else ("B" if h == "A" else "A")
                by_pair[i] = {"original": v, "swapped": v}
            else:
                by_pair[i] = {"original": "A", "swapped": "B"}
            prefs[i] = {h}
        hits += pairwise_calibration_figures(by_pair=by_pair, prefs=prefs, th=th).trust_ok
    return hits / sims


@pytest.mark.django_db
def test_a_pairwise_judge_at_the_kappa_threshold_is_rarely_trusted():
    assert share_pairwise_trusted(consistency=0.95, agree=0.80, n=200) <= 0.05


@pytest.mark.django_db
def test_a_pairwise_judge_at_the_position_consistency_floor_is_rarely_trusted():
    assert share_pairwise_trusted(consistency=0.80, agree=0.95, n=200) <= 0.05


@pytest.mark.django_db
def test_a_good_pairwise_judge_is_trusted_with_enough_labels():
    assert share_pairwise_trusted(consistency=0.95, agree=0.95, n=200) >= 0.9
