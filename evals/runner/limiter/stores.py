"""Where the limiter's state lives: in this process (``MemoryStore``), in a SQLite file
shared by every process of one machine (``SqliteStore``, the embedded default), or in Redis
shared by every worker (``RedisStore``, production). Memory and SQLite run
``evals.runner.limiter.rules`` on the state; Redis runs the same rules as Lua scripts.

Every store is used from a coroutine and answers ``acquire`` / ``release`` / ``renew`` for one
endpoint key at a time; a store that cannot be reached raises ``StoreDown`` (never hangs past
its timeouts: Redis 2 s per command, after at most 2 s waiting for one of the process's
``REDIS_CONNECTIONS``; SQLite's busy timeout 5 s).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
from pathlib import Path

from evals.runner.limiter.rules import (
    BURST_S,
    DECREASE_PACED,
    DECREASE_SPACING_S,
    DECREASE_UNPACED,
    DEFAULT_PAUSE_S,
    FACTOR_MIN,
    RECOVER_S,
    SAFETY,
    STATE_TTL_S,
    Ask,
    Outcome,
    acquire_rule,
    release_rule,
    renew_rule,
)


class StoreDown(Exception):
    """The store could not be reached or answered an error."""


class MemoryStore:
    """State in this process, shared by its threads and event loops."""

    name = "memory"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.states: dict[str, dict] = {}

    async def acquire(self, key: str, token: str, now: float, ask: Ask) -> float:
        with self._lock:
            return acquire_rule(self.states.setdefault(key, {}), token, now, ask)

    async def release(self, key: str, token: str, now: float, outcome: Outcome | None) -> None:
        with self._lock:
            release_rule(self.states.setdefault(key, {}), token, now, outcome)

    async def renew(self, key: str, tokens: list[str], now: float, lease_s: float) -> None:
        with self._lock:
            renew_rule(self.states.setdefault(key, {}), tokens, now, lease_s)

    async def aclose(self) -> None:
        return None


# The process's own store: the fallback when the shared one is down.
PROCESS_STORE = MemoryStore()


class SqliteStore:
    """State in a SQLite file (one row per endpoint: its state as JSON), changed under
    ``BEGIN IMMEDIATE`` so every process of the machine sees one order. Not durable on
    purpose (``synchronous=OFF``): a lost update only loses leases, which expire."""

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

    def _apply(self, key: str, now: float, change) -> float | None:
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

    async def acquire(self, key: str, token: str, now: float, ask: Ask) -> float:
        return self._apply(key, now, lambda state: acquire_rule(state, token, now, ask))

    async def release(self, key: str, token: str, now: float, outcome: Outcome | None) -> None:
        self._apply(key, now, lambda state: release_rule(state, token, now, outcome))

    async def renew(self, key: str, tokens: list[str], now: float, lease_s: float) -> None:
        self._apply(key, now, lambda state: renew_rule(state, tokens, now, lease_s))

    async def aclose(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


# The rules of ``rules.py`` in Lua (Redis 5+), one script per operation, atomic by Redis's
# single-threaded script execution. ``now`` is the caller's clock (epoch seconds); the
# workers' clocks are assumed synchronised (NTP: milliseconds).
_LUA_STATE = """
local s = {}
local raw = redis.call('HGETALL', KEYS[1])
for i = 1, #raw, 2 do s[raw[i]] = tonumber(raw[i + 1]) end
local function num(x) return string.format('%.6f', x) end
local function factor(now, recover)
  if s['f'] == nil then return 1.0 end
  return math.min(1.0, s['f'] + math.max(0.0, now - s['td']) / recover)
end
"""

_LUA_ACQUIRE = (
    _LUA_STATE
    + """
local token, now = ARGV[1], tonumber(ARGV[2])
local capacity, rpm_ask, tpm_ask = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local need_t, lease = tonumber(ARGV[6]), tonumber(ARGV[7])
local safety, burst = tonumber(ARGV[8]), tonumber(ARGV[9])
local recover, ttl = tonumber(ARGV[10]), tonumber(ARGV[11])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', num(now))
if rpm_ask > 0 and s['rpm_d'] ~= rpm_ask then
  redis.call('HSET', KEYS[1], 'rpm_d', num(rpm_ask)); s['rpm_d'] = rpm_ask
end
if tpm_ask > 0 and s['tpm_d'] ~= tpm_ask then
  redis.call('HSET', KEYS[1], 'tpm_d', num(tpm_ask)); s['tpm_d'] = tpm_ask
end
redis.call('EXPIRE', KEYS[1], ttl)
if s['until'] ~= nil and s['until'] - now > 1e-6 then
  return num(math.max(0.001, s['until'] - now))
end
local f = factor(now, recover)
if redis.call('ZCARD', KEYS[2]) >= math.max(1, math.floor(capacity * f)) then return '-1' end
local function limit(d, l)
  local best = nil
  if d ~= nil and d > 0 then best = d end
  if l ~= nil and l > 0 and (best == nil or l < best) then best = l end
  return best
end
local function bucket(tk, tsk, per_minute, need)
  local rate = safety * per_minute / 60.0
  local size = math.max(1.0, rate * burst, need)
  local tokens = s[tk]
  if tokens == nil then tokens = 0.0 end
  local ts = s[tsk]
  if ts == nil then ts = now end
  tokens = math.min(size, tokens + math.max(0.0, now - ts) * rate)
  redis.call('HSET', KEYS[1], tk, num(tokens), tsk, num(math.max(ts, now)))
  if tokens >= need - 1e-3 then return tokens, 0 end
  return tokens, math.max(0.001, (need - tokens) / rate)
end
local rpm = limit(s['rpm_d'], s['rpm_l'])
local tpm = limit(s['tpm_d'], s['tpm_l'])
local rtok, ttok = nil, nil
if rpm ~= nil then
  local wait
  rtok, wait = bucket('rt', 'rts', rpm * f, 1.0)
  if wait > 0 then return num(wait) end
end
if tpm ~= nil and need_t > 0 then
  local wait
  ttok, wait = bucket('tt', 'tts', tpm * f, need_t)
  if wait > 0 then return num(wait) end
end
if rtok ~= nil then redis.call('HSET', KEYS[1], 'rt', num(rtok - 1.0)) end
if ttok ~= nil then redis.call('HSET', KEYS[1], 'tt', num(ttok - need_t)) end
redis.call('ZADD', KEYS[2], num(now + lease), token)
redis.call('EXPIRE', KEYS[2], ttl)
return '0'
"""
)

_LUA_RELEASE = (
    _LUA_STATE
    + """
local token, now = ARGV[1], tonumber(ARGV[2])
redis.call('ZREM', KEYS[2], token)
if ARGV[3] == '' then return 0 end
local limited = ARGV[3] == '1'
local retry_after, rpm_l, tpm_l = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local rem_req, reset_req = tonumber(ARGV[7]), tonumber(ARGV[8])
local rem_tok, reset_tok, delta = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local fmin, recover = tonumber(ARGV[12]), tonumber(ARGV[13])
local spacing, default_pause = tonumber(ARGV[14]), tonumber(ARGV[15])
local unpaced, paced_beta = tonumber(ARGV[16]), tonumber(ARGV[17])
local new_limit = false
if rpm_l > 0 then
  if s['rpm_l'] ~= tonumber(num(rpm_l)) then new_limit = true end
  redis.call('HSET', KEYS[1], 'rpm_l', num(rpm_l))
end
if tpm_l > 0 then
  if s['tpm_l'] ~= tonumber(num(tpm_l)) then new_limit = true end
  redis.call('HSET', KEYS[1], 'tpm_l', num(tpm_l))
end
if delta ~= 0 and s['tt'] ~= nil then redis.call('HSET', KEYS[1], 'tt', num(s['tt'] - delta)) end
local pause = -1
if limited then
  if retry_after >= 0 then pause = retry_after else pause = default_pause end
  local rts = now
  if s['rts'] ~= nil and s['rts'] > now then rts = s['rts'] end
  redis.call('HSET', KEYS[1], 'rt', '0', 'rts', num(rts))
  local td = s['td']
  if (not new_limit) and (td == nil or now - td >= spacing) then
    local paced = false
    for _, name in ipairs({'rpm_d', 'rpm_l', 'tpm_d', 'tpm_l'}) do
      local v = s[name]
      if name == 'rpm_l' and rpm_l > 0 then v = rpm_l end
      if name == 'tpm_l' and tpm_l > 0 then v = tpm_l end
      if v ~= nil and v > 0 then paced = true end
    end
    local beta = unpaced
    if paced then beta = paced_beta end
    local f = math.max(fmin, factor(now, recover) * beta)
    redis.call('HSET', KEYS[1], 'f', num(f), 'td', num(now))
  end
end
if rem_req == 0 and reset_req > 0 then pause = math.max(pause, reset_req) end
if rem_tok == 0 and reset_tok > 0 then pause = math.max(pause, reset_tok) end
if pause >= 0 then
  local untl = now + pause
  if s['until'] ~= nil and s['until'] > untl then untl = s['until'] end
  redis.call('HSET', KEYS[1], 'until', num(untl))
end
return 0
"""
)

_LUA_RENEW = """
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', ARGV[1], ARGV[i]) end
return 0
"""


def _opt(value: float | None) -> str:
    return "-1" if value is None else repr(float(value))


# Connections of one process's Redis store (each command is one short Lua script).
REDIS_CONNECTIONS = 32


class RedisStore:
    """State in Redis: a hash per endpoint (``assay:limiter:{<digest>}:state``) and a sorted
    set of slot holders scored by lease expiry (``...:slots``). One client per store
    instance (per event loop), built on first use."""

    name = "redis"

    def __init__(self, url: str) -> None:
        self.url = url
        self._client = None
        self._scripts: dict = {}

    def _redis(self):
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
            self._scripts = {
                "acquire": self._client.register_script(_LUA_ACQUIRE),
                "release": self._client.register_script(_LUA_RELEASE),
                "renew": self._client.register_script(_LUA_RENEW),
            }
        return self._client

    @staticmethod
    def keys(key: str) -> list[str]:
        """The Redis keys of endpoint ``key``: [state hash, slots sorted set]."""
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        return [f"assay:limiter:{{{digest}}}:state", f"assay:limiter:{{{digest}}}:slots"]

    async def _run(self, name: str, keys: list[str], args: list) -> object:
        import redis  # noqa: PLC0415 - only where Redis is configured

        try:
            self._redis()
            return await self._scripts[name](keys=keys, args=args)
        except (redis.RedisError, OSError) as exc:
            raise StoreDown(f"redis: {type(exc).__name__}: {exc}") from exc

    async def acquire(self, key: str, token: str, now: float, ask: Ask) -> float:
        args = [
            token,
            repr(now),
            ask.capacity,
            repr(float(ask.rpm or 0)),
            repr(float(ask.tpm or 0)),
            repr(float(ask.tokens)),
            repr(float(ask.lease_s)),
            repr(SAFETY),
            repr(BURST_S),
            repr(RECOVER_S),
            STATE_TTL_S,
        ]
        return float(await self._run("acquire", self.keys(key), args))

    async def release(self, key: str, token: str, now: float, outcome: Outcome | None) -> None:
        if outcome is None:
            args = [token, repr(now), ""]
        else:
            args = [
                token,
                repr(now),
                "1" if outcome.limited else "0",
                _opt(outcome.retry_after_s),
                repr(float(outcome.rpm_limit or 0)),
                repr(float(outcome.tpm_limit or 0)),
                _opt(outcome.remaining_requests),
                _opt(outcome.reset_requests_s),
                _opt(outcome.remaining_tokens),
                _opt(outcome.reset_tokens_s),
                repr(float(outcome.tokens_delta)),
                repr(FACTOR_MIN),
                repr(RECOVER_S),
                repr(DECREASE_SPACING_S),
                repr(DEFAULT_PAUSE_S),
                repr(DECREASE_UNPACED),
                repr(DECREASE_PACED),
            ]
        await self._run("release", self.keys(key), args)

    async def renew(self, key: str, tokens: list[str], now: float, lease_s: float) -> None:
        if tokens:
            await self._run("renew", self.keys(key)[1:], [repr(now + lease_s), *tokens])

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            with contextlib.suppress(Exception):  # closing a client of a dead server
                await client.aclose()
