"""The limiter's rules, as pure functions on one endpoint's state: who may send now, and
what an answer teaches. The in-process and SQLite stores run these functions; the Redis store
runs the same rules as Lua (``providers.limiter.stores._LUA_EXCHANGE``), and the tests
hold the two to the same scenarios.

One endpoint's state is a dict of floats (absent = unset):

| field | meaning |
|---|---|
| ``rpm_d``, ``tpm_d`` | the limits a caller declared (a target's or judge's ``rpm``/``tpm``) |
| ``rpm_l``, ``tpm_l`` | the limits the provider announced (``x-ratelimit-limit-*``) |
| ``rt``, ``rts`` | the request bucket: tokens, and when they were counted (epoch seconds) |
| ``tt``, ``tts`` | the token bucket (model tokens), the same way |
| ``f``, ``td`` | the adaptive factor set at the last decrease, and when |
| ``until`` | no call is sent before this time (``Retry-After``, an exhausted ``remaining``) |
| ``gw``, ``gn``, ``gp`` | calls granted: the current minute's start and count, the last one's |

plus ``holders``: ``{holder: [slots, lease expiry]}`` (a holder is one caller's limiter:
its slots are its calls in flight and the ones it keeps for its next call), and
``waiting``: ``{holder: [waiting since, expiry, its cap]}``.

Every change is one exchange (``exchange_rule``), one store round trip: the holder says how
many slots it keeps (the rest are given back) and how many it wants, and tells what its
answers taught (``learn_rule``). Granting, in this order: a pause (``until``) waits; a
holder that has waited past ``STARVE_S`` with fewer slots than its share goes first; the
slots of every holder must stay within ``floor(capacity × factor)`` (at least 1), and while
another holder waits, this holder's within its ``share``; the request bucket must hold one
request per slot; the token bucket the call's estimated tokens per slot. The buckets are
classic token buckets (refill ``limit / 60`` per second, size ``BURST_S`` seconds of refill)
run at ``SAFETY`` × the limit × the factor, the limit being the smaller of the declared and
the announced one. A caller that declares no limit uses the one another caller declared for
the same endpoint.

Adapting to 429 (``learn_rule``), additive increase, multiplicative decrease (Chiu & Jain,
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
from typing import Any

# One endpoint's state as stored (JSON): the floats of the module docstring by short name,
# and ``holders`` (holder -> [slots, lease expiry]) and ``waiting`` (holder -> [waiting
# since, expiry, cap]), lists mixing ints and floats.
State = dict[str, Any]
Holders = dict[str, list[Any]]

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
# ``exchange_rule``'s wait when every slot is taken: wait for a release.
FULL = -1.0
# Tokens short by less than this count as there (a clock of epoch seconds steps by 0.24 µs,
# too coarse to wait out the float residue of a refill).
EPSILON = 1e-3
# The shortest wait answered (a shorter one would read as "granted" in Redis's 6 decimals).
MIN_WAIT_S = 1e-3
# An idle endpoint's state is forgotten after this long (Redis key expiry).
STATE_TTL_S = 3600
# A holder left wanting a slot counts as waiting this long unless it asks again (its polls
# are at most 0.1 s apart).
WAIT_TTL_S = 0.5
# A holder that has waited this long for a slot goes first, once: no other holder is granted
# or hands a slot on until it has had one (a judge at concurrency 8 beside a target at 64
# would otherwise wait for fewer than 8 in flight forever).
STARVE_S = 0.5


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


def factor(state: State, now: float) -> float:
    """The adaptive factor at ``now``, in [FACTOR_MIN, 1]: 1 until a 429, then the value set
    by the last decrease plus ``(now - td) / RECOVER_S``."""
    if "f" not in state:
        return 1.0
    decreased_to: float = state["f"]
    decreased_at: float = state["td"]
    return min(1.0, decreased_to + max(0.0, now - decreased_at) / RECOVER_S)


def limit_in_force(declared: float | None, learned: float | None) -> float | None:
    """The smaller of the declared and announced limits (per minute), None when neither."""
    known = [x for x in (declared, learned) if x]
    return min(known) if known else None


def _bucket(
    state: State, tokens_key: str, ts_key: str, per_minute: float, need: float, now: float
) -> tuple[float, float]:
    """(tokens now, refill per second) of a bucket refilled at ``SAFETY × per_minute / 60``/s,
    ``need`` the tokens of one call; stores the count at ``now``."""
    rate = SAFETY * per_minute / 60.0
    size = max(1.0, rate * BURST_S, need)
    tokens: float = state.get(tokens_key, size * START_FULL)
    counted: float = state.get(ts_key, now)
    tokens = min(size, tokens + max(0.0, now - counted) * rate)
    # Counted up to now, granted or not. Never backwards: workers' clocks and calls
    # interleave, and a refill counted from an earlier time would be counted twice.
    state[tokens_key], state[ts_key] = tokens, max(counted, now)
    return tokens, rate


def _calls_in(tokens: float, need: float) -> int:
    """Whole calls of ``need`` tokens that ``tokens`` pays for (short by < EPSILON counts)."""
    return math.floor((tokens + EPSILON) / need)


def _wait_for(tokens: float, need: float, rate: float) -> float:
    return max(MIN_WAIT_S, (need - tokens) / rate)


def recent_sends(state: State, now: float) -> float:
    """Calls granted over about the last minute (a sliding window from two fixed ones: the
    current one's count plus the previous one's, weighted by its part still inside)."""
    if "gw" not in state:
        return 0.0
    current: float = state["gn"]
    previous: float = state["gp"]
    window: float = state["gw"]
    return current + previous * max(0.0, 1.0 - (now - window) / 60.0)


def _window_roll(state: State, now: float) -> None:
    if "gw" not in state:
        state["gw"], state["gn"], state["gp"] = now, 0.0, 0.0
    elif now - state["gw"] >= 60.0:
        state["gp"] = state["gn"] if now - state["gw"] < 120.0 else 0.0
        state["gw"], state["gn"] = now, 0.0


def learn_rule(state: State, now: float, outcome: Outcome) -> None:
    """Learn from one answered attempt (module docstring: announced limits, the token
    estimate's correction, a 429's pause and slow-down, an exhausted ``remaining``); mutates
    ``state``. An announced request limit is not learnt when more calls than it were sent in
    the last minute (``recent_sends``): a provider that let them through does not limit
    requests per minute to it (the shared mock announces its in-flight limit that way)."""
    new_limit = False
    rpm_limit = outcome.rpm_limit
    if rpm_limit and rpm_limit > 0 and recent_sends(state, now) > rpm_limit:
        rpm_limit = None
    for field, value in (("rpm_l", rpm_limit), ("tpm_l", outcome.tpm_limit)):
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


def outcome_merge(first: Outcome | None, then: Outcome | None) -> Outcome | None:
    """Two outcomes not yet told to the store as one: limited if either was (the longer
    pause), the later announced limits, an exhausted ``remaining`` with the longer reset,
    the token corrections summed."""
    if first is None or then is None:
        return then if first is None else first

    def later(a: float | None, b: float | None) -> float | None:
        return b if b is not None else a

    def exhausted(
        rem_a: float | None, reset_a: float | None, rem_b: float | None, reset_b: float | None
    ) -> tuple[float | None, float | None]:
        if rem_a == 0 and rem_b == 0:
            return 0.0, max(reset_a or 0.0, reset_b or 0.0) or None
        if rem_b == 0:
            return rem_b, reset_b
        if rem_a == 0:
            return rem_a, reset_a
        return later(rem_a, rem_b), later(reset_a, reset_b)

    pause = None
    if first.limited or then.limited:
        pauses = [
            (DEFAULT_PAUSE_S if o.retry_after_s is None else o.retry_after_s)
            for o in (first, then)
            if o.limited
        ]
        pause = max(pauses)
    rem_r, reset_r = exhausted(
        first.remaining_requests, first.reset_requests_s,
        then.remaining_requests, then.reset_requests_s,
    )  # fmt: skip
    rem_t, reset_t = exhausted(
        first.remaining_tokens, first.reset_tokens_s,
        then.remaining_tokens, then.reset_tokens_s,
    )  # fmt: skip
    return Outcome(
        limited=first.limited or then.limited,
        retry_after_s=pause,
        rpm_limit=later(first.rpm_limit, then.rpm_limit),
        tpm_limit=later(first.tpm_limit, then.tpm_limit),
        remaining_requests=rem_r,
        reset_requests_s=reset_r,
        remaining_tokens=rem_t,
        reset_tokens_s=reset_t,
        tokens_delta=first.tokens_delta + then.tokens_delta,
    )


@dataclass(frozen=True)
class Grant:
    """The store's answer to an exchange, and what the holder may do until it asks again.

    ``granted``: slots granted now (at most ``want``); ``wait``: 0 when all were granted
    (or none wanted), ``FULL`` when the rest must wait for a release, else the seconds
    until a pause or a bucket lets one more in; ``held``: the holder's slots now;
    ``in_flight``: every holder's; ``cap``: ``floor(capacity × factor)``, at least 1;
    ``share``: the slots this holder may keep while others wait; ``others_waiting``:
    another holder waits for a slot; ``yield_all``: another has waited past
    ``STARVE_S`` and goes first; ``paced``: a request or token bucket is in force, so every
    call must be counted by the store; ``until``: the pause's end (epoch s, 0 if none)."""

    granted: int
    wait: float
    held: int
    in_flight: int
    cap: int
    share: int
    others_waiting: bool
    yield_all: bool
    paced: bool
    until: float


def exchange_rule(
    state: State,
    holder: str,
    now: float,
    ask: Ask,
    *,
    keep: int,
    want: int = 0,
    outcome: Outcome | None = None,
) -> Grant:
    """One holder's exchange with the endpoint's state at ``now`` (epoch s); mutates
    ``state``. In order: holders and waiters whose lease ran out are dropped; ``outcome``
    (the holder's answers since its last exchange, merged; None: nothing) is learnt;
    the holder now holds ``keep`` slots (those still in use or kept idle: the others are
    given back); then up to ``want`` more are granted: none during a pause, none while
    another holder with fewer slots than its share has waited past ``STARVE_S`` (it goes
    first, once, unless this one starves too and waited longer),
    as many as fit under ``cap`` (and, while others wait, under the holder's ``share``, an
    equal part of ``cap`` between the holders holding or waiting), and as the request and
    token buckets pay for (``ask.tokens`` a call). A holder left wanting for lack of room
    is registered as waiting for ``WAIT_TTL_S``; its slots are leased for ``ask.lease_s``.
    """
    holders: Holders = state.setdefault("holders", {})  # holder -> [slots, lease expiry]
    waiting: Holders = state.setdefault("waiting", {})  # holder -> [waiting since, expiry, cap]
    for gone in [h for h, (_, expiry) in holders.items() if expiry <= now]:
        del holders[gone]
    for gone in [h for h, (_, expiry, _) in waiting.items() if expiry <= now]:
        del waiting[gone]
    _window_roll(state, now)
    if ask.rpm:
        state["rpm_d"] = float(ask.rpm)
    if ask.tpm:
        state["tpm_d"] = float(ask.tpm)
    if outcome is not None:
        learn_rule(state, now, outcome)
    count = max(0, int(keep))
    others_held = sum(c for h, (c, _) in holders.items() if h != holder)
    f = factor(state, now)
    cap = max(1, math.floor(ask.capacity * f))
    rpm = limit_in_force(state.get("rpm_d"), state.get("rpm_l"))
    tpm = limit_in_force(state.get("tpm_d"), state.get("tpm_l"))
    granted, wait, room_short = 0, 0.0, False
    if want > 0:
        since = waiting[holder][0] if holder in waiting else now
        until = state.get("until", 0.0)
        # another holder starving goes first, unless this one starves too and waited longer
        me_too = since <= now - STARVE_S and count < _share(holders, waiting, holder, cap)
        starving = any(s < since or not me_too for s in _starving(holders, waiting, holder, now))
        if until - now > 1e-6:  # to the microsecond, as Redis stores times
            wait = max(MIN_WAIT_S, until - now)
        elif starving:
            wait, room_short = FULL, True
        else:
            room = cap - count - others_held
            if any(h != holder for h in waiting):
                room = min(room, _share(holders, waiting, holder, cap) - count)
            n = min(want, room)
            if n < want:
                room_short = True
            if n <= 0:
                wait = FULL
            else:
                k = n
                request_tokens = token_tokens = None
                if rpm:
                    request_tokens, rate = _bucket(state, "rt", "rts", rpm * f, 1.0, now)
                    k = min(k, _calls_in(request_tokens, 1.0))
                    if k < n:
                        wait = _wait_for(request_tokens - k, 1.0, rate)
                if k > 0 and tpm and ask.tokens > 0:
                    token_tokens, rate = _bucket(state, "tt", "tts", tpm * f, ask.tokens, now)
                    paid = _calls_in(token_tokens, ask.tokens)
                    if paid < k:
                        k = paid
                        wait = _wait_for(token_tokens - k * ask.tokens, ask.tokens, rate)
                if k > 0:
                    if request_tokens is not None:
                        state["rt"] = request_tokens - k
                    if token_tokens is not None:
                        state["tt"] = token_tokens - k * ask.tokens
                    granted = k
                    state["gn"] += k
                if granted == n and room_short:
                    wait = FULL
    count += granted
    if want > granted and room_short:
        # waiting since its last grant: a grant ends its turn at the front (STARVE_S)
        since = waiting[holder][0] if holder in waiting and granted == 0 else now
        waiting[holder] = [since, now + WAIT_TTL_S, cap]
    else:
        waiting.pop(holder, None)
    if count > 0:
        holders[holder] = [count, now + ask.lease_s]
    else:
        holders.pop(holder, None)
    return Grant(
        granted=granted,
        wait=wait,
        held=count,
        in_flight=count + others_held,
        cap=cap,
        share=_share(holders, waiting, holder, cap),
        others_waiting=any(h != holder for h in waiting),
        yield_all=bool(_starving(holders, waiting, holder, now)),
        paced=bool(rpm or tpm),
        until=state.get("until", 0.0),
    )


def _starving(holders: Holders, waiting: Holders, holder: str, now: float) -> list[float]:
    """Since when each other holder has waited, of those waiting past ``STARVE_S`` with
    fewer slots than their share."""
    return [
        since
        for h, (since, _, cap) in waiting.items()
        if h != holder
        and since <= now - STARVE_S
        and holders.get(h, [0])[0] < _share(holders, waiting, h, cap)
    ]


def _share(holders: Holders, waiting: Holders, holder: str, cap: float) -> int:
    """An equal part of ``cap`` (rounded up) between the holders holding or waiting, this
    one included."""
    active = {h for h, (c, _) in holders.items() if c > 0} | set(waiting) | {holder}
    return max(1, math.ceil(cap / len(active)))
