"""How an agent's outcome and trajectory rates moved between two runs, per case
(docs/agents.md, "Grading agents").

Both runs need a ``state`` and a ``trajectory`` grader (``evals.report.agents``); cases are
matched as the comparison matches them (content hash and key, ``evals.comparison.compute``
rule 2), and only shared cases are shown. Per case and side: passed of graded trials with
the Wilson 95% interval, for the outcome and for the trajectory (each side's verdict rule
over its graders; an errored or missing grade is out, never a pass or a fail), and the
change of each rate. Over the shared cases: each side's mean per-case rate with its 95%
interval clustered by case (``stats.intervals.clustered_rate_interval``).

The comparison's decision (the gate) is on the overall verdict, which for an agent run is
the outcome; these rates are shown beside it and decide nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evals.grading.verdict import case_tally
from evals.models import Run
from evals.report.agents import agent_codes, agent_keys
from evals.report.figures import case_wilson
from evals.report.rows import runs_rows_get
from stats.intervals import ClusteredMean, clustered_rate_interval


@dataclass(frozen=True)
class RateMove:
    """One rate on one case: base and head ``passed`` of ``graded`` with their rates
    (None when nothing was graded) and Wilson 95% intervals, and ``delta`` (head − base;
    None unless both are graded)."""

    base_passed: int
    base_graded: int
    base_rate: float | None
    base_interval: tuple[float, float]
    head_passed: int
    head_graded: int
    head_rate: float | None
    head_interval: tuple[float, float]
    delta: float | None


@dataclass(frozen=True)
class AgentCaseMove:
    """A shared case's ``outcome`` and ``trajectory`` moves."""

    key: str
    content_hash: str
    outcome: RateMove
    trajectory: RateMove


@dataclass(frozen=True)
class AgentMoves:
    """Over the ``n_cases`` shared cases: the mean per-case outcome and trajectory rates of
    each side with clustered 95% intervals; ``cases`` with the largest move first."""

    n_cases: int
    outcome_base: ClusteredMean
    outcome_head: ClusteredMean
    trajectory_base: ClusteredMean
    trajectory_head: ClusteredMean
    cases: list[AgentCaseMove]


def _side(run: Run, rows) -> dict[tuple[str, str], tuple[int, int, int, int]] | None:
    """(content hash, key) -> (outcome passed, graded, trajectory passed, graded)."""
    codes = agent_codes(run=run, rows=rows)
    if codes is None:
        return None
    n = len(rows.cases)
    o = case_tally(codes.outcome, codes.case_idx, n)
    p = case_tally(codes.path, codes.case_idx, n)
    return {
        (c[4], c[2]): (int(o.passed[i]), int(o.graded[i]), int(p.passed[i]), int(p.graded[i]))
        for i, c in enumerate(rows.cases)
    }


def _move(bk: int, bn: int, hk: int, hn: int) -> RateMove:
    base = bk / bn if bn else None
    head = hk / hn if hn else None
    return RateMove(
        bk,
        bn,
        base,
        case_wilson(bk, bn) if bn else (0.0, 1.0),
        hk,
        hn,
        head,
        case_wilson(hk, hn) if hn else (0.0, 1.0),
        None if base is None or head is None else head - base,
    )


def _mean(passed: list[int], graded: list[int]) -> ClusteredMean:
    k, n = np.array(passed, dtype=np.int64), np.array(graded, dtype=np.int64)
    return clustered_rate_interval(k[n > 0], n[n > 0])


def agent_moves_get(*, base: Run, head: Run) -> AgentMoves | None:
    """The agent rates of ``head`` against ``base`` per shared case (module docstring); None
    unless both runs have ``state`` and ``trajectory`` graders. The run loader's queries for
    both runs at once (``runs_rows_get``, without usage); none when a run lacks either grader
    (its grader set says so before any trial is read)."""
    if not all(all(agent_keys(run)) for run in (base, head)):
        return None
    rows = runs_rows_get(runs=[base, head], usage=False)
    b, h = _side(base, rows[base.id]), _side(head, rows[head.id])
    if b is None or h is None:
        return None
    shared = [key for key in h if key in b]
    cases = [
        AgentCaseMove(
            key=case_key,
            content_hash=content_hash,
            outcome=_move(*b[pair][:2], *h[pair][:2]),
            trajectory=_move(*b[pair][2:], *h[pair][2:]),
        )
        for pair in shared
        for content_hash, case_key in [pair]
    ]
    cases.sort(
        key=lambda c: (
            -max(abs(c.outcome.delta or 0.0), abs(c.trajectory.delta or 0.0)),
            c.key,
        )
    )
    col = lambda side, i: [side[k][i] for k in shared]  # noqa: E731
    return AgentMoves(
        n_cases=len(shared),
        outcome_base=_mean(col(b, 0), col(b, 1)),
        outcome_head=_mean(col(h, 0), col(h, 1)),
        trajectory_base=_mean(col(b, 2), col(b, 3)),
        trajectory_head=_mean(col(h, 2), col(h, 3)),
        cases=cases,
    )
