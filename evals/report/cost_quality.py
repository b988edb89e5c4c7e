"""Cost against quality: what a run's passes cost, null-aware (``CostQuality``).

One rule for the run list, the run report, the comparison, the grid of runs and the suite's
cost–quality chart (``cost_quality``):

- ``cost_per_trial_usd`` = total cost / finished trials; ``cost_per_passing_trial_usd`` =
  total cost / passing trials. Both need the total: when any finished trial has an unknown
  cost (a model without a price) they are None, and ``cost_unknown`` says for how many of
  ``finished`` trials (unknown is not zero; the known part is only a lower bound).
- ``pass_rate_per_usd`` = pass rate / cost per trial: the pass rate a dollar buys, read
  as "passing trials per dollar" (for a run where every case has the same number of trials
  it is exactly passes per dollar). Its interval is the pass rate's 95% interval over the
  same cost per trial (the cost is measured, not sampled: the uncertainty is the pass
  rate's). None when the pass rate or the cost per trial is unknown, and when the cost is
  zero (a free run has no finite rate per dollar; ``note`` says so).

Per-trial amounts are kept to 12 decimals (picodollars) so a small known cost never
rounds to zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from core.bounds import COST_USD_QUANTUM

PER_TRIAL_QUANTUM = Decimal("1e-12")
COLUMN_QUANTUM = COST_USD_QUANTUM  # the cost column's decimals (core.bounds)


@dataclass(frozen=True)
class CostQuality:
    """A run's (or one side's) cost against its pass rate (module docstring for the rules).

    ``finished`` trials (ok or pipeline error), ``cost_unknown`` of them with a null cost,
    ``cost_known_usd`` the sum of the known costs (a lower bound when some are unknown),
    ``cost_usd`` total (None unless every finished trial's cost is known),
    ``cost_per_trial_usd``, ``cost_per_passing_trial_usd`` (USD, Decimal, None when
    unknown or undefined), ``pass_rate`` with its 95% interval (``pass_rate_low``,
    ``pass_rate_high``; None when nothing was graded), ``pass_rate_per_usd`` with
    ``pass_rate_per_usd_low``/``_high`` (floats, per USD), ``note``: why a figure is
    undefined ("" when all are defined)."""

    finished: int
    cost_unknown: int
    passed: int
    cost_known_usd: Decimal
    cost_usd: Decimal | None
    cost_per_trial_usd: Decimal | None
    cost_per_passing_trial_usd: Decimal | None
    pass_rate: float | None
    pass_rate_low: float | None
    pass_rate_high: float | None
    pass_rate_per_usd: float | None
    pass_rate_per_usd_low: float | None
    pass_rate_per_usd_high: float | None
    note: str = ""


def cost_quality(
    *,
    finished: int,
    cost_known_usd: Decimal | None,
    cost_unknown: int,
    passed: int,
    pass_rate: float | None,
    pass_rate_low: float | None,
    pass_rate_high: float | None,
) -> CostQuality:
    """``CostQuality`` from a run's totals: ``finished`` trials, the sum of their known costs
    (USD; None or 0 when none is known), ``cost_unknown`` trials with a null cost, overall
    ``passed`` trials and the pass rate with its 95% interval (fractions). No queries."""
    # Quantized to the column's 12 decimal places: SQLite sums decimals as floats (15
    # significant digits), PostgreSQL exactly; both then read the same.
    known = Decimal(cost_known_usd or 0).quantize(COLUMN_QUANTUM)
    total = known if finished and not cost_unknown else None
    per_trial = (total / finished).quantize(PER_TRIAL_QUANTUM) if total is not None else None
    per_pass = (
        (total / passed).quantize(PER_TRIAL_QUANTUM) if total is not None and passed else None
    )
    note = ""
    if not finished:
        note = "no trial has finished"
    elif cost_unknown:
        note = f"cost unknown for {cost_unknown} of {finished} trials"
    elif pass_rate is None:
        note = "nothing graded"
    elif total == 0:
        note = "cost is $0: no finite pass rate per dollar"
    per_usd = low = high = None
    if per_trial and pass_rate is not None:
        per_usd = pass_rate / float(per_trial)
        if pass_rate_low is not None and pass_rate_high is not None:
            low, high = pass_rate_low / float(per_trial), pass_rate_high / float(per_trial)
    return CostQuality(
        finished=finished,
        cost_unknown=cost_unknown,
        passed=passed,
        cost_known_usd=known,
        cost_usd=total,
        cost_per_trial_usd=per_trial,
        cost_per_passing_trial_usd=per_pass,
        pass_rate=pass_rate,
        pass_rate_low=pass_rate_low,
        pass_rate_high=pass_rate_high,
        pass_rate_per_usd=per_usd,
        pass_rate_per_usd_low=low,
        pass_rate_per_usd_high=high,
        note=note,
    )
