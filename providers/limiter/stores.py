"""Where the limiter's state lives: this process (``MemoryStore``), a SQLite file per machine
(``SqliteStore``) or Redis (``RedisStore``, the rules as Lua). One operation,
``exchange``, one round trip; an unreachable store raises ``StoreDown`` within its timeouts
(Redis 2 s a command plus 2 s for a connection; SQLite busy 5 s)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from providers.limiter.rules import (
    BURST_S,
    DECREASE_PACED,
    DECREASE_SPACING_S,
    DECREASE_UNPACED,
    DEFAULT_PAUSE_S,
    FACTOR_MIN,
    RECOVER_S,
    SAFETY,
    STARVE_S,
    STATE_TTL_S,
    WAIT_TTL_S,
    Ask,
    Grant,
    Outcome,
    State,
    exchange_rule,
)

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

T = TypeVar("T")


class StoreDown(Exception):
    """The store could not be reached or answered an error."""


class Store(Protocol):
    """Where endpoints' states live: ``exchange`` runs ``rules.exchange_rule`` on one
    endpoint's state atomically (raising ``StoreDown`` when it cannot be reached)."""

    name: str

    async def exchange(
        self,
        key: str,
        holder: str,
        now: float,
        ask: Ask,
        *,
        keep: int,
        want: int = 0,
        outcome: Outcome | None = None,
    ) -> Grant: ...

    async def aclose(self) -> None: ...


class MemoryStore:
    """State in this process, shared by its threads and event loops."""

    name = "memory"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.states: dict[str, State] = {}

    async def exchange(
        self,
        key: str,
        holder: str,
        now: float,
        ask: Ask,
        *,
        keep: int,
        want: int = 0,
        outcome: Outcome | None = None,
    ) -> Grant:
        """``rules.exchange_rule`` on endpoint ``key``'s state in this process."""
        with self._lock:
            state = self.states.setdefault(key, {})
            return exchange_rule(state, holder, now, ask, keep=keep, want=want, outcome=outcome)

    async def aclose(self) -> None:
        return None


# The process's own store: the fallback when the shared one is down.
PROCESS_STORE = MemoryStore()


class SqliteStore:
    """One row per endpoint (state as JSON) under ``BEGIN IMMEDIATE``. ``synchronous=OFF`` on
    purpose: a lost update only loses leases, which expire."""

    name = "sqlite"

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=5.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS limiter_state "
                "(key TEXT PRIMARY KEY, state TEXT NOT NULL, touched REAL NOT NULL)"
            )
            self._conn = conn
        return self._conn

    def _apply(self, key: str, now: float, change: Callable[[State], T]) -> T:
        with self._lock:
            try:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    row = conn.execute(
                        "SELECT state FROM limiter_state WHERE key = ?", (key,)
                    ).fetchone()
                    state = json.loads(row[0]) if row else {}
                    answer = change(state)
                    conn.execute(
                        "INSERT INTO limiter_state (key, state, touched) VALUES (?, ?, ?) "
                        "ON CONFLICT(key) DO UPDATE SET state = excluded.state, "
                        "touched = excluded.touched",
                        (key, json.dumps(state), now),
                    )
                    conn.execute(
                        "DELETE FROM limiter_state WHERE touched < ?", (now - STATE_TTL_S,)
                    )
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise StoreDown(f"limiter file {self.path}: {exc}") from exc
            return answer

    async def exchange(
        self,
        key: str,
        holder: str,
        now: float,
        ask: Ask,
        *,
        keep: int,
        want: int = 0,
        outcome: Outcome | None = None,
    ) -> Grant:
        """One ``BEGIN IMMEDIATE`` transaction; raises ``StoreDown``."""
        return self._apply(
            key,
            now,
            lambda state: exchange_rule(
                state, holder, now, ask, keep=keep, want=want, outcome=outcome
            ),
        )

    async def aclose(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


# ``rules.exchange_rule`` in Lua (Redis 5+), atomic by Redis's single-threaded script
# execution. ``now`` is the caller's clock (epoch seconds); the workers' clocks are assumed
# synchronised (NTP: milliseconds). KEYS: the state hash, the holders hash (``n:<holder>``
# slots, ``e:<holder>`` lease expiry), the waiting hash (``s:`` since, ``e:`` expiry, ``c:``
# cap). Times are stored to the microsecond.
_LUA_EXCHANGE = """
local s = {}
local raw = redis.call('HGETALL', KEYS[1])
for i = 1, #raw, 2 do s[raw[i]] = tonumber(raw[i + 1]) end
local function num(x) return string.format('%.6f', x) end
local function set(field, value)
  s[field] = value; redis.call('HSET', KEYS[1], field, num(value))
end
local holder, now = ARGV[1], tonumber(ARGV[2])
local capacity, rpm_ask, tpm_ask = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local need_t, lease = tonumber(ARGV[6]), tonumber(ARGV[7])
local keep, want = tonumber(ARGV[8]), tonumber(ARGV[9])
local learn, limited = ARGV[10] == '1', ARGV[11] == '1'
local retry_after, rpm_l, tpm_l = tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14])
local rem_req, reset_req = tonumber(ARGV[15]), tonumber(ARGV[16])
local rem_tok, reset_tok, delta = tonumber(ARGV[17]), tonumber(ARGV[18]), tonumber(ARGV[19])
local safety, burst = tonumber(ARGV[20]), tonumber(ARGV[21])
local recover, ttl = tonumber(ARGV[22]), tonumber(ARGV[23])
local fmin, spacing, default_pause = tonumber(ARGV[24]), tonumber(ARGV[25]), tonumber(ARGV[26])
local unpaced, paced_beta = tonumber(ARGV[27]), tonumber(ARGV[28])
local wait_ttl, starve = tonumber(ARGV[29]), tonumber(ARGV[30])

local hn, he, ws, we, wc = {}, {}, {}, {}, {}
raw = redis.call('HGETALL', KEYS[2])
for i = 1, #raw, 2 do
  local kind, h = string.sub(raw[i], 1, 1), string.sub(raw[i], 3)
  if kind == 'n' then hn[h] = tonumber(raw[i + 1]) else he[h] = tonumber(raw[i + 1]) end
end
for h, e in pairs(he) do
  if e <= now then hn[h] = nil; redis.call('HDEL', KEYS[2], 'n:' .. h, 'e:' .. h) end
end
raw = redis.call('HGETALL', KEYS[3])
for i = 1, #raw, 2 do
  local kind, h = string.sub(raw[i], 1, 1), string.sub(raw[i], 3)
  local v = tonumber(raw[i + 1])
  if kind == 's' then ws[h] = v elseif kind == 'e' then we[h] = v else wc[h] = v end
end
for h, e in pairs(we) do
  if e <= now then
    ws[h] = nil; wc[h] = nil
    redis.call('HDEL', KEYS[3], 's:' .. h, 'e:' .. h, 'c:' .. h)
  end
end

if s['gw'] == nil then set('gw', now); set('gn', 0); set('gp', 0)
elseif now - s['gw'] >= 60 then
  if now - s['gw'] < 120 then set('gp', s['gn']) else set('gp', 0) end
  set('gw', now); set('gn', 0)
end
if rpm_ask > 0 and s['rpm_d'] ~= rpm_ask then set('rpm_d', rpm_ask) end
if tpm_ask > 0 and s['tpm_d'] ~= tpm_ask then set('tpm_d', tpm_ask) end
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ttl) end

local function factor()
  if s['f'] == nil then return 1.0 end
  return math.min(1.0, s['f'] + math.max(0.0, now - s['td']) / recover)
end
local function limit(d, l)
  local best = nil
  if d ~= nil and d > 0 then best = d end
  if l ~= nil and l > 0 and (best == nil or l < best) then best = l end
  return best
end

if learn then
  local new_limit = false
  local recent = s['gn'] + s['gp'] * math.max(0.0, 1.0 - (now - s['gw']) / 60.0)
  if rpm_l > 0 and recent > rpm_l then rpm_l = 0 end
  if rpm_l > 0 then
    if s['rpm_l'] ~= rpm_l then new_limit = true end
    set('rpm_l', rpm_l)
  end
  if tpm_l > 0 then
    if s['tpm_l'] ~= tpm_l then new_limit = true end
    set('tpm_l', tpm_l)
  end
  if delta ~= 0 and s['tt'] ~= nil then set('tt', s['tt'] - delta) end
  local pause = -1
  if limited then
    if retry_after >= 0 then pause = retry_after else pause = default_pause end
    local rts = now
    if s['rts'] ~= nil and s['rts'] > now then rts = s['rts'] end
    set('rt', 0); set('rts', rts)
    if (not new_limit) and (s['td'] == nil or now - s['td'] >= spacing) then
      local beta = unpaced
      if limit(s['rpm_d'], s['rpm_l']) ~= nil or limit(s['tpm_d'], s['tpm_l']) ~= nil then
        beta = paced_beta
      end
      local f = math.max(fmin, factor() * beta)
      set('f', f); set('td', now)
    end
  end
  if rem_req == 0 and reset_req > 0 then pause = math.max(pause, reset_req) end
  if rem_tok == 0 and reset_tok > 0 then pause = math.max(pause, reset_tok) end
  if pause >= 0 then
    local untl = now + pause
    if s['until'] ~= nil and s['until'] > untl then untl = s['until'] end
    set('until', untl)
  end
end

local count = math.max(0, keep)
local others_held = 0
for h, n in pairs(hn) do if h ~= holder then others_held = others_held + n end end
local f = factor()
local cap = math.max(1, math.floor(capacity * f))
local rpm = limit(s['rpm_d'], s['rpm_l'])
local tpm = limit(s['tpm_d'], s['tpm_l'])
local function share(h, c)
  local active, n = {}, 0
  for x, v in pairs(hn) do if v > 0 and not active[x] then active[x] = true; n = n + 1 end end
  for x, _ in pairs(ws) do if not active[x] then active[x] = true; n = n + 1 end end
  if not active[h] then n = n + 1 end
  return math.max(1, math.ceil(c / n))
end
local function starving()
  local out = {}
  for h, since in pairs(ws) do
    if h ~= holder and since <= now - starve and (hn[h] or 0) < share(h, wc[h]) then
      table.insert(out, since)
    end
  end
  return out
end
local function others_wait()
  for h, _ in pairs(ws) do if h ~= holder then return true end end
  return false
end
local function bucket(tk, tsk, per_minute, need)
  local rate = safety * per_minute / 60.0
  local size = math.max(1.0, rate * burst, need)
  local tokens = s[tk]
  if tokens == nil then tokens = 0.0 end
  local ts = s[tsk]
  if ts == nil then ts = now end
  tokens = math.min(size, tokens + math.max(0.0, now - ts) * rate)
  set(tk, tokens); set(tsk, math.max(ts, now))
  return tokens, rate
end

local granted, wait, room_short = 0, 0.0, false
if want > 0 then
  local since = ws[holder] or now
  local untl = s['until'] or 0
  local me_too = since <= now - starve and count < share(holder, cap)
  local blocked = false
  for _, other in ipairs(starving()) do
    if other < since or not me_too then blocked = true end
  end
  if untl - now > 1e-6 then
    wait = math.max(0.001, untl - now)
  elseif blocked then
    wait, room_short = -1, true
  else
    local room = cap - count - others_held
    if others_wait() then room = math.min(room, share(holder, cap) - count) end
    local n = math.min(want, room)
    if n < want then room_short = true end
    if n <= 0 then
      wait = -1
    else
      local k = n
      local rtok, ttok = nil, nil
      if rpm ~= nil then
        local rate
        rtok, rate = bucket('rt', 'rts', rpm * f, 1.0)
        k = math.min(k, math.floor(rtok + 1e-3))
        if k < n then wait = math.max(0.001, (1.0 - (rtok - k)) / rate) end
      end
      if k > 0 and tpm ~= nil and need_t > 0 then
        local rate
        ttok, rate = bucket('tt', 'tts', tpm * f, need_t)
        local paid = math.floor((ttok + 1e-3) / need_t)
        if paid < k then
          k = paid
          wait = math.max(0.001, (need_t - (ttok - k * need_t)) / rate)
        end
      end
      if k > 0 then
        if rtok ~= nil then set('rt', rtok - k) end
        if ttok ~= nil then set('tt', ttok - k * need_t) end
        granted = k
        set('gn', s['gn'] + k)
      end
      if granted == n and room_short then wait = -1 end
    end
  end
end
count = count + granted
if want > granted and room_short then
  local since = now
  if ws[holder] ~= nil and granted == 0 then since = ws[holder] end
  ws[holder] = since; wc[holder] = cap
  redis.call('HSET', KEYS[3], 's:' .. holder, num(since), 'e:' .. holder, num(now + wait_ttl),
    'c:' .. holder, cap)
elseif ws[holder] ~= nil then
  ws[holder] = nil; wc[holder] = nil
  redis.call('HDEL', KEYS[3], 's:' .. holder, 'e:' .. holder, 'c:' .. holder)
end
if count > 0 then
  hn[holder] = count
  redis.call('HSET', KEYS[2], 'n:' .. holder, count, 'e:' .. holder, num(now + lease))
elseif hn[holder] ~= nil then
  hn[holder] = nil
  redis.call('HDEL', KEYS[2], 'n:' .. holder, 'e:' .. holder)
end
local yield = 0
if #starving() > 0 then yield = 1 end
local others = 0
if others_wait() then others = 1 end
local paced = 0
if rpm ~= nil or tpm ~= nil then paced = 1 end
return {granted, num(wait), count, count + others_held, cap, share(holder, cap), others, yield,
  paced, num(s['until'] or 0)}
"""


def _opt(value: float | None) -> str:
    return "-1" if value is None else repr(float(value))


# Connections of one process's Redis store (each command is one short Lua script).
REDIS_CONNECTIONS = 32


class RedisStore:
    """Per endpoint, hashes ``assay:limiter:{<digest>}:state``, ``:holders`` and ``:waiting``,
    changed by ``_LUA_EXCHANGE``. One client per instance (per event loop)."""

    name = "redis"

    def __init__(self, url: str) -> None:
        self.url = url
        self._client: Redis | None = None
        self._script: AsyncScript | None = None

    def _redis(self) -> Redis:
        if self._client is None:
            import redis.asyncio as aioredis  # noqa: PLC0415 - only where Redis is configured

            # A blocking pool: a call loop of a few hundred calls asks and releases slots at
            # once, beyond redis-py's default of 100 connections, which raises (a StoreDown,
            # then a per-process fallback); here a command waits for a free connection.
            self._client = aioredis.Redis.from_pool(
                aioredis.BlockingConnectionPool.from_url(
                    self.url,
                    max_connections=REDIS_CONNECTIONS,
                    timeout=2.0,
                    socket_timeout=2.0,
                    socket_connect_timeout=1.0,
                )
            )
            self._script = self._client.register_script(_LUA_EXCHANGE)
        return self._client

    @staticmethod
    def keys(key: str) -> list[str]:
        """The Redis keys of endpoint ``key``: [state hash, holders hash, waiting hash]."""
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        return [f"assay:limiter:{{{digest}}}:{part}" for part in ("state", "holders", "waiting")]

    async def exchange(
        self,
        key: str,
        holder: str,
        now: float,
        ask: Ask,
        *,
        keep: int,
        want: int = 0,
        outcome: Outcome | None = None,
    ) -> Grant:
        """One Lua script, one round trip; raises ``StoreDown``."""
        import redis  # noqa: PLC0415 - only where Redis is configured

        o = outcome if outcome is not None else Outcome()
        args: list[str | int | float] = [
            holder,
            repr(now),
            ask.capacity,
            repr(float(ask.rpm or 0)),
            repr(float(ask.tpm or 0)),
            repr(float(ask.tokens)),
            repr(float(ask.lease_s)),
            int(keep),
            int(want),
            "0" if outcome is None else "1",
            "1" if o.limited else "0",
            _opt(o.retry_after_s),
            repr(float(o.rpm_limit or 0)),
            repr(float(o.tpm_limit or 0)),
            _opt(o.remaining_requests),
            _opt(o.reset_requests_s),
            _opt(o.remaining_tokens),
            _opt(o.reset_tokens_s),
            repr(float(o.tokens_delta)),
            repr(SAFETY),
            repr(BURST_S),
            repr(RECOVER_S),
            STATE_TTL_S,
            repr(FACTOR_MIN),
            repr(DECREASE_SPACING_S),
            repr(DEFAULT_PAUSE_S),
            repr(DECREASE_UNPACED),
            repr(DECREASE_PACED),
            repr(WAIT_TTL_S),
            repr(STARVE_S),
        ]
        try:
            self._redis()
            script = self._script
            assert script is not None  # registered by _redis with its client
            answer = await script(keys=self.keys(key), args=args)
        except (redis.RedisError, OSError) as exc:
            raise StoreDown(f"redis: {type(exc).__name__}: {exc}") from exc
        granted, wait, held, in_flight, cap, share, others, yield_all, paced, until = answer
        return Grant(
            granted=int(granted),
            wait=float(wait),
            held=int(held),
            in_flight=int(in_flight),
            cap=int(cap),
            share=int(share),
            others_waiting=others == 1,
            yield_all=yield_all == 1,
            paced=paced == 1,
            until=float(until),
        )

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            with contextlib.suppress(Exception):  # closing a client of a dead server
                await client.aclose()
