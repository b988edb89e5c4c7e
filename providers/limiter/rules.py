"""The limiter's rules as pure functions on one endpoint's state (docs/rate-limits.md). The
memory and SQLite stores run them; Redis runs the same as Lua (``stores._LUA_EXCHANGE``),
and tests hold both to the same scenarios.

| field | meaning |
|---|---|
| ``rpm_d``, ``tpm_d`` | the limits a caller declared |
| ``rpm_l``, ``tpm_l`` | the limits the provider announced (``x-ratelimit-limit-*``) |
| ``rt``, ``rts`` | the request bucket: tokens, and when counted (epoch seconds) |
| ``tt``, ``tts`` | the token bucket (model tokens), the same way |
| ``f``, ``td`` | the adaptive factor set at the last decrease, and when |
| ``until`` | no call is sent before this time |
| ``gw``, ``gn``, ``gp`` | calls granted: the current minute's start and count, the last one's |

plus ``holders``: ``{holder: [slots, lease expiry]}`` and ``waiting``: ``{holder:
[waiting since, expiry, its cap]}``.

Buckets refill ``limit / 60`` per second (size ``BURST_S``) at ``SAFETY`` × limit × factor.
A 429 decreases the factor multiplicatively and it recovers additively (AIMD: Chiu and
Jain, 1989; RFC 5681), and pauses the endpoint for ``retry-after-ms``, else
``Retry-After``, else ``DEFAULT_PAUSE_S`` (openai-python's ``_calculate_retry_timeout``)."""

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
    """A call's request: ``capacity`` (calls in flight), declared ``rpm``/``tpm`` or None,
    ``tokens`` (estimated model tokens), ``lease_s``."""

    capacity: int
    rpm: float | None = None
    tpm: float | None = None
    tokens: float = 0.0
    lease_s: float = LEASE_S


@dataclass(frozen=True)
class Outcome:
    """What one answered attempt teaches: ``limited`` (429), ``retry_after_s``, announced limits,
    ``remaining_*`` with ``reset_*_s``, ``tokens_delta`` (real minus estimated tokens)."""

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
    """The factor at ``now``, in [FACTOR_MIN, 1]: the last decrease plus
    ``(now - td) / RECOVER_S``."""
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
    """(tokens now, refill per second) at ``SAFETY × per_minute / 60``; stores the count."""
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
    """Calls granted over about the last minute (a sliding window from two fixed ones)."""
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
    """Learn from one answered attempt; mutates ``state``. An announced request limit is not
    learnt when more calls than it went through in the last minute (it limits something else)."""
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
    """Two untold outcomes as one: limited if either (longer pause), later limits, the longer
    reset, token corrections summed."""
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
    """The store's answer: ``granted`` (at most ``want``); ``wait``: 0, ``FULL`` (wait for a
    release) or seconds until a pause or bucket allows one; ``held``, ``in_flight``; ``cap``:
    ``floor(capacity × factor)`` >= 1; ``share``; ``others_waiting``; ``yield_all`` (another
    starves); ``paced`` (a bucket is in force); ``until`` (pause end, epoch s, 0 if none)."""

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
    """One holder's exchange at ``now``; mutates ``state``. Drops expired leases, learns
    ``outcome``, sets the holder to ``keep`` slots, then grants up to ``want``: none during a
    pause or while another holder starves (waited past ``STARVE_S`` below its share), within
    ``cap`` (and ``share`` while others wait) and what the buckets pay for. A holder left
    wanting waits registered for ``WAIT_TTL_S``."""
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
    """Since when each other holder starving (past ``STARVE_S``, below its share) has waited."""
    return [
        since
        for h, (since, _, cap) in waiting.items()
        if h != holder
        and since <= now - STARVE_S
        and holders.get(h, [0])[0] < _share(holders, waiting, h, cap)
    ]


def _share(holders: Holders, waiting: Holders, holder: str, cap: float) -> int:
    """``cap`` split equally (rounded up) between holders holding or waiting, this one included."""
    active = {h for h, (c, _) in holders.items() if c > 0} | set(waiting) | {holder}
    return max(1, math.ceil(cap / len(active)))
