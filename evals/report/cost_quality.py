"""Cost against quality: what a run's passes cost, null-aware (``CostQuality``), one rule for
every surface (``cost_quality``).

- ``cost_per_trial_usd`` = total / finished trials; ``cost_per_passing_trial_usd`` = total /
  passing trials; both None when any finished trial's cost is unknown (``cost_unknown``).
- ``pass_rate_per_usd`` = pass rate / cost per trial ("passing trials per dollar"); its
  interval is the pass rate's over the same cost (the cost is measured, not sampled). None
  when either is unknown, or the cost is zero (``note`` says so).

Per-trial amounts keep 12 decimals so a small known cost never rounds to zero."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from core.bounds import COST_USD_QUANTUM

PER_TRIAL_QUANTUM = Decimal("1e-12")
COLUMN_QUANTUM = COST_USD_QUANTUM  # the cost column's decimals (core.bounds)


@dataclass(frozen=True)
class CostQuality:
    """A run's (or one side's) cost against its pass rate: ``finished``, ``cost_unknown``,
    ``cost_known_usd`` (a lower bound), ``cost_usd`` (None unless all known), the per-trial and
    per-passing-trial costs (USD, Decimal), ``pass_rate`` with its 95% interval,
    ``pass_rate_per_usd`` with its interval (per USD), ``note`` (why a figure is undefined)."""

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
    unknown_why: str = "",
) -> CostQuality:
    """``CostQuality`` from a run's totals (USD; rates as fractions). No queries.
    ``unknown_why``: why costs are unknown (``evals.report.costs.CostClasses.why``), added to
    the note."""
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
        note += f": {unknown_why}" if unknown_why else ""
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
