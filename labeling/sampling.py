"""Calibration sampling aimed at the false-accept rate: strata, a set's draw, plan, top-up.

A judged trial's stratum (fixed in ``design``): the judge's verdict and its first signal,
``known_fail``/``known_pass``, ``cheap_failed``, ``versions_disagree``, ``low_score`` or
``none``; ``PRIORS`` are updated by the set's labels (Beta posterior). Draw and plan:
``stats.calibration_plan``; inclusion probability drawn_s / population_s.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

from evals.models import Grade, Run, Trial
from judges.models import JudgeVersion
from labeling.models import CalibrationItem, CalibrationSet, Label
from labeling.selectors import reference_labels, trust_thresholds
from stats.calibration_plan import Plan, Stratum, draw_order, plan_draw

LOW_SCORE = 0.75
FLOOR = 0.25
POWER = 0.8
PRIORS = {  # (judge verdict, signal) -> starting human-fail probability
    ("pass", "known_fail"): 1.0,
    ("fail", "known_fail"): 1.0,
    ("pass", "known_pass"): 0.0,
    ("fail", "known_pass"): 0.0,
    ("pass", "cheap_failed"): 0.8,
    ("fail", "cheap_failed"): 0.9,
    ("pass", "versions_disagree"): 0.5,
    ("fail", "versions_disagree"): 0.6,
    ("pass", "low_score"): 0.3,
    ("fail", "low_score"): 0.7,
    ("pass", "none"): 0.02,
    ("fail", "none"): 0.7,
}


def judged_strata(*, run: Run, judge_version: JudgeVersion) -> dict[str, list[int]]:
    """Stratum key ("judge_pass/cheap_failed") -> sorted ids of ``run``'s ok trials that
    ``judge_version`` judged ok. Five queries.
    """
    judged = {
        tid: (passed, score)
        for tid, passed, score in Grade.objects.filter(
            trial__run=run,
            trial__status=Trial.Status.OK,
            judge_version=judge_version,
            status=Grade.Status.OK,
        ).values_list("trial_id", "passed", "score")
    }
    ids = sorted(judged)
    refs = reference_labels(trial_ids=ids).by_trial
    cheap_failed = set(
        Grade.objects.filter(
            trial_id__in=ids, judge_version__isnull=True, status=Grade.Status.OK, passed=False
        ).values_list("trial_id", flat=True)
    )
    others: dict[int, set[bool]] = defaultdict(set)
    for tid, passed in (
        Grade.objects.filter(
            trial_id__in=ids, judge_version__judge=judge_version.judge, status=Grade.Status.OK
        )
        .exclude(judge_version=judge_version)
        .values_list("trial_id", "passed")
    ):
        others[tid].add(bool(passed))
    strata: dict[str, list[int]] = defaultdict(list)
    for tid in ids:
        passed, score = judged[tid]
        verdict = "pass" if passed else "fail"
        ref = refs.get(tid)
        if ref is not None:
            signal = "known_fail" if ref.verdict == Label.Verdict.FAIL else "known_pass"
        elif tid in cheap_failed:
            signal = "cheap_failed"
        elif (not passed) in others.get(tid, set()):
            signal = "versions_disagree"
        elif passed and score is not None and score < LOW_SCORE:
            signal = "low_score"
        else:
            signal = "none"
        strata[f"judge_{verdict}/{signal}"].append(tid)
    return dict(strata)


def _prior(key: str) -> float:
    verdict, signal = key.removeprefix("judge_").split("/")
    return PRIORS[(verdict, signal)]


def design_build(strata: dict[str, list[int]]) -> dict:
    """``CalibrationSet.design``: per stratum its population's trial ids, the judge's verdict and
    the prior fail probability.
    """
    return {
        "version": 1,
        "floor": FLOOR,
        "power": POWER,
        "strata": {
            key: {
                "trials": ids,
                "judge_pass": key.startswith("judge_pass/"),
                "prior_fail": _prior(key),
            }
            for key, ids in sorted(strata.items())
        },
    }


def draw_initial(design: dict, size: int, seed: int) -> list[tuple[int, str]]:
    """``size`` trials drawn by ``stats.calibration_plan.draw_order``, seeded within strata;
    ``[(trial_id, stratum)]`` shuffled so the queue order hides the strata.
    """
    strata = [
        Stratum(key, len(s["trials"]), s["judge_pass"], s["prior_fail"])
        for key, s in design["strata"].items()
    ]
    counts: dict[str, int] = defaultdict(int)
    for key in draw_order(strata, size, design.get("floor", FLOOR)):
        counts[key] += 1
    rng = random.Random(seed)
    picked: list[tuple[int, str]] = []
    for key in sorted(counts):
        ids = list(design["strata"][key]["trials"])
        rng.shuffle(ids)
        picked.extend((tid, key) for tid in ids[: counts[key]])
    rng.shuffle(picked)
    return picked


def inclusion_probabilities_set(calibration_set: CalibrationSet) -> None:
    """Write each planned item's inclusion probability: drawn_s / population_s of its
    stratum (simple random sampling within strata)."""
    strata = calibration_set.design.get("strata", {})
    drawn: dict[str, int] = defaultdict(int)
    for key in calibration_set.items.exclude(stratum="").values_list("stratum", flat=True):
        drawn[key] += 1
    for key, n in drawn.items():
        population = len(strata.get(key, {}).get("trials", [])) or n
        CalibrationItem.objects.filter(calibration_set=calibration_set, stratum=key).update(
            inclusion_probability=min(1.0, n / population)
        )


@dataclass(frozen=True)
class SetPlan:
    """A planned set's state and plan: ``plan`` (``stats.calibration_plan.Plan``),
    ``strata`` as given to it, and ``message``: what to do next, in words."""

    plan: Plan
    strata: list[Stratum]
    message: str
    can_top_up: bool

    @property
    def to_add(self) -> int:
        """Items the plan draws into the set (the top-up)."""
        return sum(self.plan.add.values())

    @property
    def rows(self) -> list[dict]:
        """Per stratum for the set page: ``stratum``, ``inclusion`` (None when empty),
        ``fail_probability`` (posterior), ``add``.
        """
        return [
            {
                "stratum": s,
                "inclusion": s.drawn / s.population if s.population else None,
                "fail_probability": self.plan.posterior.get(s.key),
                "add": self.plan.add.get(s.key, 0),
            }
            for s in self.strata
        ]


def _strata_now(calibration_set: CalibrationSet) -> list[Stratum]:
    design = calibration_set.design
    items = list(calibration_set.items.values_list("trial_id", "stratum"))
    refs = reference_labels(trial_ids=[tid for tid, _ in items]).by_trial
    drawn: dict[str, int] = defaultdict(int)
    labeled: dict[str, int] = defaultdict(int)
    fails: dict[str, int] = defaultdict(int)
    for tid, key in items:
        drawn[key] += 1
        if tid in refs:
            labeled[key] += 1
            fails[key] += refs[tid].verdict == Label.Verdict.FAIL
    out = []
    for key, s in design["strata"].items():
        out.append(
            Stratum(
                key,
                len(s["trials"]),
                bool(s["judge_pass"]),
                float(s["prior_fail"]),
                drawn=drawn[key],
                labeled=labeled[key],
                fails=fails[key],
                false_accepts=fails[key] if s["judge_pass"] else 0,
            )
        )
    return out


def set_plan_get(*, calibration_set: CalibrationSet) -> SetPlan | None:
    """A planned set's plan (None without a design): items to label, to draw, and the
    probability the FAR bounds then reach ``max_far`` (``stats.calibration_plan.plan_draw``).
    """
    design = calibration_set.design
    if not design or not design.get("strata"):
        return None
    th = trust_thresholds(suite=calibration_set.suite)
    strata = _strata_now(calibration_set)
    plan = plan_draw(
        strata, max_far=th.max_far, power=float(design.get("power", POWER)), floor=FLOOR
    )
    bound = f"{100 * th.max_far:g}%"
    fails_now = sum(s.fails for s in strata)
    labeled_now = sum(s.labeled for s in strata)
    if not plan.reachable:
        basis = (
            "at the starting guesses (few labels yet: label the set and look again)"
            if labeled_now < 10
            else f"at the current estimate ({labeled_now} labels)"
        )
        message = (
            f"No draw from this run is likely to bring the false-accept bound under {bound} "
            f"{basis}: the judge seems to pass too many human fails, or the run has too few "
            f"of them ({fails_now} labeled so far, {plan.fails_needed} needed at best)."
        )
    elif plan.to_label == 0:
        message = (
            f"Labeled enough for the false-accept bound to be decided against {bound} "
            f"({fails_now} human fails)."
        )
    else:
        added = sum(plan.add.values())
        draw = f" ({added} of them new items: top the set up)" if added else ""
        message = (
            f"Label about {plan.to_label} more item{'s' if plan.to_label != 1 else ''}"
            f"{draw}, most likely human-fails (about {plan.expected_fails:.0f} expected), "
            f"to bring the false-accept bound under {bound} with probability "
            f"{100 * plan.probability:.0f}% ± {100 * plan.probability_se:.0f}% "
            f"(Monte Carlo; at least {100 * plan.power:.0f}% planned)."
        )
    return SetPlan(plan, strata, message, plan.reachable and sum(plan.add.values()) > 0)
