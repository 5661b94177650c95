"""Keys and limit counters in Redis, shared by replicas: each check-and-count is one Lua script (atomic on the
server, on the server's clock); counters expire by themselves."""

from __future__ import annotations

import time

from app import redis_client
from app.keys.records import LIMITS, WINDOW_S, KeyRecord, Refusal, key_hash, seconds_to_midnight, utc_day

PREFIX = "mt:"
# KEYS: minute window counter, today's characters, totals hash. ARGV: req_limit, chars, daily_limit, window ms,
# day ttl s. The window counter expires a minute after its first request (its PTTL is the Retry-After).
CONSUME = """
local req_limit, chars, daily = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if req_limit >= 0 and count >= req_limit then
  return {1, redis.call('PTTL', KEYS[1])}
end
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
if daily >= 0 and used + chars > daily then return {2, 0} end
if redis.call('INCR', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4])) end
if redis.call('INCRBY', KEYS[2], chars) == chars then redis.call('EXPIRE', KEYS[2], tonumber(ARGV[5])) end
redis.call('HINCRBY', KEYS[3], 'requests', 1)
redis.call('HINCRBY', KEYS[3], 'chars', chars)
return {0, 0}
"""


def _limit(value: bytes | None) -> int | None:
    """A stored override ("" = default)."""
    return int(value) if value not in (None, b"") else None


class RedisStore:
    """The same operations as SqliteStore, over one Redis connection pool."""

    def __init__(self, url: str, timeout: float = 30.0):
        self.redis = redis_client.connect(url, timeout)
        self.script = self.redis.register_script(CONSUME)

    def _keys(self, subject: str, day: str) -> list[str]:
        return [f"{PREFIX}window:{subject}", f"{PREFIX}chars:{subject}:{day}", f"{PREFIX}usage:{subject}"]

    async def lookup(self, key: str) -> KeyRecord | None:
        """The live (not revoked) record of a key, else None."""
        fields = await self.redis.hgetall(f"{PREFIX}key:{key_hash(key)}")
        if not fields or fields.get(b"revoked") == b"1":
            return None
        return self._record(fields)

    @staticmethod
    def _record(fields: dict[bytes, bytes]) -> KeyRecord:
        limits = {k: _limit(fields.get(k.encode())) for k in LIMITS}
        return KeyRecord(fields[b"name"].decode(), limits, float(fields[b"created"]), fields.get(b"revoked") == b"1")

    async def consume(self, subject: str, req_limit: int, chars: int, daily_limit: int) -> Refusal | None:
        """Count one request of `chars` characters unless it is over a limit (-1: none); the refusal if it is."""
        now = time.time()
        args = [req_limit, chars, daily_limit, WINDOW_S * 1000, 2 * 86400]
        verdict, wait_ms = await self.script(keys=self._keys(subject, utc_day(now)), args=args)
        if verdict == 1:
            return Refusal("req_limit", req_limit, max(1, -(-int(wait_ms) // 1000)))
        if verdict == 2:
            return Refusal("daily_char_limit", daily_limit, seconds_to_midnight(now))
        return None

    async def add(self, key: str, record: KeyRecord) -> None:
        """Store a new key (ValueError when the name or the key exists)."""
        digest = key_hash(key)
        if not await self.redis.hsetnx(f"{PREFIX}names", record.name, digest):
            raise ValueError(f"a key named {record.name!r} exists")
        fields = {"name": record.name, "created": record.created, "revoked": 0}
        fields.update({k: "" if record.limits.get(k) is None else record.limits[k] for k in LIMITS})
        await self.redis.hset(f"{PREFIX}key:{digest}", mapping=fields)

    async def records(self) -> list[KeyRecord]:
        """Every key, revoked ones too, by name."""
        names = await self.redis.hgetall(f"{PREFIX}names")
        out = [self._record(await self.redis.hgetall(f"{PREFIX}key:{d.decode()}")) for d in names.values()]
        return sorted(out, key=lambda r: r.name)

    async def _digest(self, name: str) -> str:
        digest = await self.redis.hget(f"{PREFIX}names", name)
        if digest is None:
            raise KeyError(name)
        return digest.decode()

    async def update(self, name: str, limits: dict[str, int | None]) -> None:
        """Change a key's overrides (None: back to the default); KeyError for an unknown name."""
        mapping = {k: "" if v is None else v for k, v in limits.items()}
        if mapping:
            await self.redis.hset(f"{PREFIX}key:{await self._digest(name)}", mapping=mapping)

    async def revoke(self, name: str) -> None:
        """Refuse the key from now on (it stays listed); KeyError for an unknown name."""
        await self.redis.hset(f"{PREFIX}key:{await self._digest(name)}", "revoked", 1)

    async def usage(self, subject: str) -> dict[str, int]:
        """Requests in the current minute window, characters today, and totals."""
        window, today, totals = self._keys(subject, utc_day(time.time()))
        minute = int(await self.redis.get(window) or 0)
        chars = int(await self.redis.get(today) or 0)
        t = await self.redis.hgetall(totals)
        return {"requests_last_minute": minute, "chars_today": chars,
                "requests_total": int(t.get(b"requests", 0)), "chars_total": int(t.get(b"chars", 0))}  # fmt: skip

    async def probe(self) -> None:
        """A small write (the dependency's health check)."""
        await redis_client.probe(self.redis)

    async def close(self) -> None:
        """Close the connections."""
        await self.redis.aclose()
