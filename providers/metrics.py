"""The model endpoint calls' counters (docs/operations.md), written by every process that calls
(``core.metrics.store``): each HTTP attempt by provider protocol, endpoint host and status,
the retries, the 429s, and the wait for the shared limiter's slot. Counted in the attempt
loop (``providers.client.EndpointClient``), once per attempt."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

CALLS = Counter(
    "assay_provider_calls",
    "HTTP attempts to model endpoints; status: the HTTP status, or timeout / connection_error.",
    ["provider", "host", "status"],
)
RETRIES = Counter(
    "assay_provider_retries",
    "Attempts made again after a retryable failure (429, 5xx, timeout, connection error); "
    "kind: what failed.",
    ["provider", "host", "kind"],
)
RATE_LIMITED = Counter(
    "assay_provider_rate_limited",
    "Answers with status 429 (rate limited).",
    ["provider", "host"],
)
LIMITER_WAIT = Histogram(
    "assay_limiter_wait_seconds",
    "Seconds an attempt waited for a slot of its endpoint's shared limiter "
    "(providers.limiter: calls in flight, rpm, tpm, a 429's pause).",
    ["provider", "host"],
    buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
)
