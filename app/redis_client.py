"""The server's Redis clients (keys and limits, glossaries, the translation cache): every command gives up after the
store's timeout, connecting or waiting for the answer, and a dropped connection (a restarted Redis) is tried again
once, at once, on a fresh one; a timeout is never retried (app.dependency counts it and stops calling)."""

from __future__ import annotations

import time

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

PROBE_KEY = "mt:probe"


def connect(url: str, timeout: float) -> aioredis.Redis:
    """A client (a connection pool) for `url`."""
    retry = Retry(NoBackoff(), 1, (RedisConnectionError,))
    return aioredis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=retry)


async def probe(redis: aioredis.Redis) -> None:
    """A small write (a replica, a full memory or a failing disk refuses writes while it still answers reads)."""
    await redis.set(PROBE_KEY, time.time(), ex=60)
