"""A comparison's cost rows: usage over the shared cases' finished trials of each side (cost,
tokens, latency, cost per passing trial) and head − base per trial, null-aware."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from evals.comparison.run_data import CaseData
from evals.report.cost_quality import PER_TRIAL_QUANTUM, CostQuality, cost_quality
from stats.intervals import clustered_rate_interval


@dataclass(frozen=True)
class Usage:
    """Usage over the shared cases' finished trials of one side: ``cost_usd`` total (None
    when any cost is unknown; ``cost_known_usd`` then is a lower bound), per-trial means
    (USD, tokens in+out, ms; None when unknown), ``cost_unknown``/``tokens_unknown`` trial
    counts, ``finished`` trials; ``quality``: cost per passing trial and pass rate per dollar
    over the same cases (``evals.report.cost_quality``)."""

    finished: int
    cost_usd: Decimal | None
    cost_known_usd: Decimal
    cost_unknown: int
    cost_per_trial_usd: Decimal | None
    tokens: int | None
    tokens_unknown: int
    tokens_per_trial: float | None
    latency_mean_ms: float | None
    quality: CostQuality | None = None


@dataclass(frozen=True)
class UsageDelta:
    """head − base per-trial means (null-aware: None when either side is unknown)."""

    base: Usage
    head: Usage
    cost_per_trial_usd: Decimal | None
    tokens_per_trial: float | None
    latency_mean_ms: float | None


def _usage(cases: list[CaseData]) -> Usage:
    finished = sum(c.finished for c in cases)
    known = sum((c.cost_known_usd for c in cases), Decimal(0))
    unknown = sum(c.cost_unknown for c in cases)
    cost = known if finished and not unknown else None
    tok_unknown = sum(c.tokens_unknown for c in cases)
    tokens = sum(c.input_tokens + c.output_tokens for c in cases) if not tok_unknown else None
    lat_n = sum(c.latency_n for c in cases)
    graded = [c for c in cases if c.graded]
    rate = clustered_rate_interval([c.passed for c in graded], [c.graded for c in graded])
    quality = cost_quality(
        finished=finished,
        cost_known_usd=known,
        cost_unknown=unknown,
        passed=sum(c.passed for c in cases),
        pass_rate=rate.mean,
        pass_rate_low=rate.ci_low,
        pass_rate_high=rate.ci_high,
    )
    return Usage(
        finished=finished,
        cost_usd=cost,
        cost_known_usd=known,
        cost_unknown=unknown,
        cost_per_trial_usd=(cost / finished).quantize(PER_TRIAL_QUANTUM)
        if cost is not None
        else None,
        tokens=tokens if finished else None,
        tokens_unknown=tok_unknown,
        tokens_per_trial=tokens / finished if tokens is not None and finished else None,
        latency_mean_ms=sum(c.latency_sum_ms for c in cases) / lat_n if lat_n else None,
        quality=quality,
    )


def _minus(a, b):
    return None if a is None or b is None else a - b


def usage_delta(base: list[CaseData], head: list[CaseData]) -> UsageDelta:
    """Each side's ``Usage`` over its cases (the shared ones) and head − base per trial."""
    base_usage, head_usage = _usage(base), _usage(head)
    return UsageDelta(
        base=base_usage,
        head=head_usage,
        cost_per_trial_usd=_minus(head_usage.cost_per_trial_usd, base_usage.cost_per_trial_usd),
        tokens_per_trial=_minus(head_usage.tokens_per_trial, base_usage.tokens_per_trial),
        latency_mean_ms=_minus(head_usage.latency_mean_ms, base_usage.latency_mean_ms),
    )
