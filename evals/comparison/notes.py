"""The notes printed beside a gate decision (``evals.comparison.gate.gate_decide``)."""

from __future__ import annotations

from evals.comparison.compute import Comparison


def decision_notes(comparison: Comparison) -> list[str]:
    """What a decision's reader should also know: simulated runs, provisional judges, breaks."""
    notes = []
    for side, run in (("base", comparison.base), ("head", comparison.head)):
        if run.simulated:
            notes.append(f"{side} is a simulated run: its outputs are synthetic")
    left_out = sorted(
        {
            g.key
            for run in (comparison.base, comparison.head)
            for g in run.graders
            if g.judge_version and not g.judge_trusted and not g.gating
        }
    )
    if left_out:
        notes.append(
            f"judge grader(s) {', '.join(left_out)} are provisional (not trusted): left out "
            "of the decision"
        )
    broken = [r.key for r in comparison.cases if r.change == "broken"]
    if broken:
        notes.append(
            f"{len(broken)} case(s) passed every base trial and failed a head trial "
            f'("broken": {", ".join(broken[:5])}{"…" if len(broken) > 5 else ""}); that '
            "alone never blocks: a drop blocks when it is beyond the pipeline's randomness"
        )
    return notes


def interval_notes(comparison: Comparison, *, blocked: bool) -> list[str]:
    """Why the "in general" interval and the decision may seem to disagree: they answer
    different questions (``docs/statistics.md``, "The interval beside the decision")."""
    h = comparison.headline
    if h is None or h.clustered.low is None or h.clustered.high is None:
        return []
    ci = f"[{h.clustered.low * 100:+.1f}, {h.clustered.high * 100:+.1f}] points"
    if blocked and h.clustered.high >= 0:
        return [
            f'the "in general" interval {ci} includes 0 although the gate blocks: the gate '
            f"asks whether these {h.n_cases} cases got worse beyond the pipeline's own "
            "randomness (they did); the interval asks whether other cases like these would "
            "too, which so few cases cannot tell"
        ]
    if not blocked and h.clustered.high < 0:
        return [
            f'the "in general" interval {ci} excludes 0 although the gate does not block: it '
            "treats each case's observed rate as exact, ignoring the randomness of its few "
            "trials, which the gate's exact tests count; more trials would tell"
        ]
    return []
