"""Pure statistics for Assay (numpy/scipy only, no Django): intervals, pass@k, tests, agreement."""

from stats.intervals import ClusteredMean, clustered_mean, clustered_rate_interval, wilson_interval
from stats.passk import pass_at_k, pass_at_k_interval, pass_hat_k, pass_hat_k_interval

__all__ = [
    "ClusteredMean",
    "clustered_mean",
    "clustered_rate_interval",
    "pass_at_k",
    "pass_at_k_interval",
    "pass_hat_k",
    "pass_hat_k_interval",
    "wilson_interval",
]
