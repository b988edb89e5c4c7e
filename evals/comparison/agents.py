"""How an agent's outcome and trajectory rates moved between two runs, per shared case
(docs/agents.md, "Grading agents").

Both runs need ``state`` and ``trajectory`` graders; cases match as the comparison matches
them. Per case and side: passed of graded with a Wilson 95% interval for each rate; over the
cases, mean per-case rates with 95% intervals clustered by case
(``stats.intervals.clustered_rate_interval``); the 2 × 2 movement (``cells``) in trials and
shares. These rates decide nothing: the gate's verdict is the outcome."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from core.strict_json import json_safe
from evals.grading.verdict import FAIL, PASS, case_tally
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


CELLS = (
    ("both_pass", "outcome pass, trajectory pass"),
    ("outcome_only", "right outcome, wrong path"),
    ("path_only", "wrong outcome, expected path"),
    ("both_fail", "outcome fail, trajectory fail"),
)


@dataclass(frozen=True)
class CellMove:
    """One 2 × 2 cell over the shared cases: ``base`` and ``head`` trials in it of ``*_in_table``;
    ``change`` in trials; shares (None for an empty table) and ``share_change``."""

    cell: str
    label: str
    base: int
    head: int
    change: int
    base_in_table: int
    head_in_table: int
    base_share: float | None
    head_share: float | None
    share_change: float | None

    @property
    def change_text(self) -> str:
        """The change in trials, signed: "+2", "−3" (a minus sign), "0"."""
        if self.change > 0:
            return f"+{self.change}"
        return f"−{-self.change}" if self.change < 0 else "0"


@dataclass(frozen=True)
class AgentMoves:
    """Mean per-case outcome and path rates a side (``n_cases``); ``cases``, largest move first."""

    n_cases: int
    outcome_base: ClusteredMean
    outcome_head: ClusteredMean
    trajectory_base: ClusteredMean
    trajectory_head: ClusteredMean
    cases: list[AgentCaseMove]
    cells: list[CellMove]


def _side(run: Run, rows) -> dict[tuple[str, str], tuple[int, ...]] | None:
    """(content hash, key) -> (outcome passed, graded, path passed, graded, trials per cell)."""
    codes = agent_codes(run=run, rows=rows)
    if codes is None:
        return None
    n = len(rows.cases)
    o = case_tally(codes.outcome, codes.case_idx, n)
    p = case_tally(codes.path, codes.case_idx, n)
    in_table = np.isin(codes.outcome, (PASS, FAIL)) & np.isin(codes.path, (PASS, FAIL))
    cells = [
        np.bincount(
            codes.case_idx[in_table & (codes.outcome == oc) & (codes.path == pc)], minlength=n
        )
        for oc, pc in ((PASS, PASS), (PASS, FAIL), (FAIL, PASS), (FAIL, FAIL))
    ]
    return {
        (c[4], c[2]): (
            int(o.passed[i]), int(o.graded[i]), int(p.passed[i]), int(p.graded[i]),
            *(int(cell[i]) for cell in cells),
        )
        for i, c in enumerate(rows.cases)
    }  # fmt: skip


def _cells(b: dict, h: dict, shared: list) -> list[CellMove]:
    """The 2 × 2 movement over ``shared`` cases (module docstring)."""
    base = [sum(b[k][4 + i] for k in shared) for i in range(len(CELLS))]
    head = [sum(h[k][4 + i] for k in shared) for i in range(len(CELLS))]
    bn, hn = sum(base), sum(head)
    moves = []
    for i, (cell, label) in enumerate(CELLS):
        bs = base[i] / bn if bn else None
        hs = head[i] / hn if hn else None
        moves.append(
            CellMove(
                cell, label, base[i], head[i], head[i] - base[i], bn, hn, bs, hs,
                None if bs is None or hs is None else hs - bs,
            )
        )  # fmt: skip
    return moves


def agent_moves_json(moves: AgentMoves | None) -> dict[str, Any] | None:
    """``moves`` as JSON for the API and the gate; None stays None."""
    if moves is None:
        return None
    return json_safe(
        {
            "n_cases": moves.n_cases,
            "cells": [asdict(c) for c in moves.cells],
            "outcome": {"base": moves.outcome_base.mean, "head": moves.outcome_head.mean},
            "trajectory": {
                "base": moves.trajectory_base.mean,
                "head": moves.trajectory_head.mean,
            },
        }
    )


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
    """The agent rates of ``head`` against ``base`` per shared case; None unless both runs have
    both agent kinds (no query then). The run loader's queries for both runs at once."""
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
            trajectory=_move(*b[pair][2:4], *h[pair][2:4]),
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
        cells=_cells(b, h, shared),
    )


def agent_moves_for(*, base: Any, head: Any) -> dict[str, Any] | None:
    """``agent_moves_json`` of two stored runs (the gate's ``agents``); None when either
    side is not a stored ``Run`` (a run file) or either run is not an agent's."""
    if not isinstance(base, Run) or not isinstance(head, Run):
        return None
    return agent_moves_json(agent_moves_get(base=base, head=head))
