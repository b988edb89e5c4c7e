"""The limiter's rules, as pure functions on one endpoint's state: who may send now, and
what an answer teaches. The in-process and SQLite stores run these functions; the Redis store
runs the same rules as Lua (``evals.runner.limiter.redis_store``), and the tests hold the two
to the same scenarios.

One endpoint's state is a dict of floats (absent = unset):

| field | meaning |
|---|---|
| ``rpm_d``, ``tpm_d`` | the limits a caller declared (a target's or judge's ``rpm``/``tpm``) |
| ``rpm_l``, ``tpm_l`` | the limits the provider announced (``x-ratelimit-limit-*``) |
| ``rt``, ``rts`` | the request bucket: tokens, and when they were counted (epoch seconds) |
| ``tt``, ``tts`` | the token bucket (model tokens), the same way |
| ``f``, ``td`` | the adaptive factor set at the last decrease, and when |
| ``until`` | no call is sent before this time (``Retry-After``, an exhausted ``remaining``) |

and ``slots``: ``{holder token: lease expiry}``, the calls in flight.

Acquire (``acquire_rule``), in this order: a pause (``until``) waits; the calls in flight
(leases not expired) must be fewer than ``floor(capacity × factor)`` (at least 1); the
request bucket must hold one request; the token bucket the call's estimated tokens. The
buckets are classic token buckets (refill ``limit / 60`` per second, size ``BURST_S``
seconds of refill) run at ``SAFETY`` × the limit × the factor, the limit being the smaller of
the declared and the announced one. A caller that declares no limit uses the one another
caller declared for the same endpoint.

Adapting to 429 (``release_rule``), additive increase, multiplicative decrease (Chiu & Jain,
"Analysis of the increase and decrease algorithms for congestion avoidance", 1989; the rule of
TCP congestion avoidance, RFC 5681): a 429 multiplies the factor by ``DECREASE_UNPACED`` (0.5)
when no rate limit is known, by ``DECREASE_PACED`` (0.9) when a known one paces the calls
(never below ``FACTOR_MIN``, at most once per ``DECREASE_SPACING_S``), and the factor grows
back linearly, by 1 every ``RECOVER_S`` seconds, to 1. A 429 that announces a limit not known
before teaches the limit instead of slowing down (the buckets now keep to it). Every 429
empties the request bucket (the provider's is empty) and pauses the endpoint for
``retry-after-ms``, else ``Retry-After``, else ``DEFAULT_PAUSE_S`` (the order the official
openai-python client reads them in, ``_calculate_retry_timeout``). A reply announcing 0
remaining requests or tokens pauses the endpoint until the announced reset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# A new bucket starts empty: the provider's own bucket keeps its whole burst as the margin
# for arrivals that bunch (a busy worker sends late what the bucket granted on time), at the
# cost of one request's wait.
START_FULL = 0.0
# A call's slot is leased for this long (or the trial lease, ASSAY_TRIAL_LEASE_SECONDS, when
# shorter) and renewed every third of it while the call runs: a killed worker's slots come
# back within it.
LEASE_S = 10.0
# Run the buckets at this share of the limit: a provider counts arrivals, not sends.
SAFETY = 0.98
# Bucket size, in seconds of refill: a burst no larger than one second of the rate.
BURST_S = 1.0
FACTOR_MIN = 0.05
# The multiplicative decrease: halve when no rate limit is known (TCP's 0.5), 10% off when a
# known rpm/tpm already paces the calls (the 429 says the pacing runs a little hot, e.g.
# arrivals bunched by a busy worker, not that the limit is unknown).
DECREASE_UNPACED = 0.5
DECREASE_PACED = 0.9
RECOVER_S = 30.0
DECREASE_SPACING_S = 1.0
DEFAULT_PAUSE_S = 1.0
# ``acquire_rule``'s answer when every slot is taken: wait for a release.
FULL = -1.0
# Tokens short by less than this count as there (a clock of epoch seconds steps by 0.24 µs,
# too coarse to wait out the float residue of a refill).
EPSILON = 1e-3
# The shortest wait answered (a shorter one would read as "granted" in Redis's 6 decimals).
MIN_WAIT_S = 1e-3
# An idle endpoint's state is forgotten after this long (Redis key expiry).
STATE_TTL_S = 3600


@dataclass(frozen=True)
class Ask:
    """One call's request for a slot: ``capacity`` (the caller's ``concurrency``, calls in
    flight to the endpoint), ``rpm``/``tpm`` declared limits (None: not declared),
    ``tokens`` (the call's estimated model tokens, for ``tpm``), ``lease_s``."""

    capacity: int
    rpm: float | None = None
    tpm: float | None = None
    tokens: float = 0.0
    lease_s: float = LEASE_S


@dataclass(frozen=True)
class Outcome:
    """What one answered attempt teaches. ``limited``: answered 429; ``retry_after_s``:
    the pause it asked for (None: not said); ``rpm_limit``/``tpm_limit``: the announced
    limits; ``remaining_requests``/``remaining_tokens`` with ``reset_requests_s``/
    ``reset_tokens_s``: the announced budget left and when it refills; ``tokens_delta``:
    the call's real tokens minus its estimate (corrects the token bucket)."""

    limited: bool = False
    retry_after_s: float | None = None
    rpm_limit: float | None = None
    tpm_limit: float | None = None
    remaining_requests: float | None = None
    reset_requests_s: float | None = None
    remaining_tokens: float | None = None
    reset_tokens_s: float | None = None
    tokens_delta: float = 0.0


def factor(state: dict, now: float) -> float:
    """The adaptive factor at ``now``, in [FACTOR_MIN, 1]: 1 until a 429, then the value set
    by the last decrease plus ``(now - td) / RECOVER_S``."""
    if "f" not in state:
        return 1.0
    return min(1.0, state["f"] + max(0.0, now - state["td"]) / RECOVER_S)


def limit_in_force(declared: float | None, learned: float | None) -> float | None:
    """The smaller of the declared and announced limits (per minute), None when neither."""
    known = [x for x in (declared, learned) if x]
    return min(known) if known else None


def _bucket(state: dict, tokens_key: str, ts_key: str, per_minute: float, need: float, now: float):
    """(tokens now, wait s) of a bucket refilled at ``SAFETY × per_minute / 60``/s; stores
    the count at ``now``."""
    rate = SAFETY * per_minute / 60.0
    size = max(1.0, rate * BURST_S, need)
    tokens = state.get(tokens_key, size * START_FULL)
    counted = state.get(ts_key, now)
    tokens = min(size, tokens + max(0.0, now - counted) * rate)
    # Counted up to now, granted or not. Never backwards: workers' clocks and calls
    # interleave, and a refill counted from an earlier time would be counted twice.
    state[tokens_key], state[ts_key] = tokens, max(counted, now)
    wait = 0.0 if tokens >= need - EPSILON else max(MIN_WAIT_S, (need - tokens) / rate)
    return tokens, wait


def acquire_rule(state: dict, token: str, now: float, ask: Ask) -> float:
    """Try to take a slot for ``token`` at ``now`` (epoch s); mutates ``state``. Returns 0
    when granted, ``FULL`` when every slot is taken, else the seconds to wait (a pause or a
    bucket). Expired leases are dropped first."""
    slots = state.setdefault("slots", {})
    for holder in [h for h, expiry in slots.items() if expiry <= now]:
        del slots[holder]
    if ask.rpm:
        state["rpm_d"] = float(ask.rpm)
    if ask.tpm:
        state["tpm_d"] = float(ask.tpm)
    if state.get("until", 0.0) - now > 1e-6:  # to the microsecond, as Redis stores times
        return max(MIN_WAIT_S, state["until"] - now)
    f = factor(state, now)
    if len(slots) >= max(1, math.floor(ask.capacity * f)):
        return FULL
    rpm = limit_in_force(state.get("rpm_d"), state.get("rpm_l"))
    tpm = limit_in_force(state.get("tpm_d"), state.get("tpm_l"))
    request_tokens = token_tokens = None
    if rpm:
        request_tokens, wait = _bucket(state, "rt", "rts", rpm * f, 1.0, now)
        if wait > 0:
            return wait
    if tpm and ask.tokens > 0:
        token_tokens, wait = _bucket(state, "tt", "tts", tpm * f, ask.tokens, now)
        if wait > 0:
            return wait
    if request_tokens is not None:
        state["rt"] = request_tokens - 1.0
    if token_tokens is not None:
        state["tt"] = token_tokens - ask.tokens
    slots[token] = now + ask.lease_s
    return 0.0


def release_rule(state: dict, token: str, now: float, outcome: Outcome | None) -> None:
    """Give back ``token``'s slot and learn from ``outcome`` (None: the call was not sent,
    or ended without an answer to learn from); mutates ``state``."""
    state.setdefault("slots", {}).pop(token, None)
    if outcome is None:
        return
    new_limit = False
    for field, value in (("rpm_l", outcome.rpm_limit), ("tpm_l", outcome.tpm_limit)):
        if value and value > 0:
            new_limit = new_limit or state.get(field) != float(value)
            state[field] = float(value)
    if outcome.tokens_delta and "tt" in state:
        state["tt"] -= outcome.tokens_delta
    pauses = []
    if outcome.limited:
        pauses.append(DEFAULT_PAUSE_S if outcome.retry_after_s is None else outcome.retry_after_s)
        state["rt"], state["rts"] = 0.0, max(state.get("rts", now), now)
        if not new_limit and now - state.get("td", -math.inf) >= DECREASE_SPACING_S:
            paced = limit_in_force(state.get("rpm_d"), state.get("rpm_l")) or limit_in_force(
                state.get("tpm_d"), state.get("tpm_l")
            )
            beta = DECREASE_PACED if paced else DECREASE_UNPACED
            state["f"], state["td"] = max(FACTOR_MIN, factor(state, now) * beta), now
    if outcome.remaining_requests == 0 and outcome.reset_requests_s:
        pauses.append(outcome.reset_requests_s)
    if outcome.remaining_tokens == 0 and outcome.reset_tokens_s:
        pauses.append(outcome.reset_tokens_s)
    if pauses:
        state["until"] = max(state.get("until", 0.0), now + max(pauses))


def renew_rule(state: dict, tokens: list[str], now: float, lease_s: float) -> None:
    """Extend the leases of ``tokens`` still held to ``now + lease_s``."""
    slots = state.setdefault("slots", {})
    for token in tokens:
        if token in slots:
            slots[token] = now + lease_s
