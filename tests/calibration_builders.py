"""Builders for the labeling tests: a run of imported trials with gold labels and one
recorded judge's verdicts."""

from __future__ import annotations

from evals.models import Run, Trial
from judges.models import JudgeVersion
from tests.import_helpers import import_bytes, jsonl, record


def labeled_records(
    humans: list[str], judges: list[str | None], *, tags: list[str] | None = None
) -> list[dict]:
    """Pointwise labeled records: record i has human verdict humans[i], judge value judges[i]
    and category tags[i] (default "calibration")."""
    out = []
    for i, (h, j) in enumerate(zip(humans, judges, strict=True), start=1):
        rec = record(
            id=f"cal-{i:03d}",
            input=f"q{i:03d}",
            category=tags[i - 1] if tags else "calibration",
            responses=[{"response_id": "R", "model": None, "text": f"r{i:03d}"}],
        )
        rec["human_label"]["value"] = h
        rec["judge_labels"][0]["value"] = j
        out.append(rec)
    return out


def labeled_run(
    humans: list[str],
    judges: list[str | None],
    *,
    tags: list[str] | None = None,
    suite: str = "s",
    run: str = "r",
) -> tuple[Run, JudgeVersion, list[Trial]]:
    """Import the records; returns the run, the judge version and the trials (by case key)."""
    import_bytes(jsonl(labeled_records(humans, judges, tags=tags)), suite=suite, run=run)
    the_run = Run.objects.get(suite__name=suite, name=run)
    version = JudgeVersion.objects.get(model="j1", protocol="p1")
    trials = list(Trial.objects.filter(run=the_run).order_by("case__key"))
    return the_run, version, trials


def good_judge_run(n_pass: int = 20, n_fail: int = 40, *, false_accepts: int = 0):
    """A run where the judge matches the gold labels except ``false_accepts`` human fails
    it passes. The default (20 passes, 40 fails, no false accept) meets the default trust
    rule: the Wilson upper bound of 0/40 is 8.8% <= 10% (35 human fails are the least)."""
    humans = ["pass"] * n_pass + ["fail"] * n_fail
    judges = ["pass"] * n_pass + ["pass"] * false_accepts + ["fail"] * (n_fail - false_accepts)
    return labeled_run(humans, judges)
