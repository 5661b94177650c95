"""The translation cache: one entry per text, keyed by everything that decides its translation (the model and the
fingerprint of its files, source, target, format, sentence splitting, alternatives and the resolved decoding
parameters). An in-process LRU bounded in bytes, and Redis behind it when configured, so that replicas share. A Redis
that fails or answers late turns into misses (app.dependency counts and logs the outage once; no call waits on it
until it is back), never into errors."""

from __future__ import annotations

import dataclasses
import hashlib
from functools import partial

import msgspec
from cachetools import LRUCache

from app import redis_client
from app.dependency import STORE_FAILURES, Dependency, Unavailable
from app.metrics import Metrics
from app.settings import Settings
from model.runner.params import DecodeParams

PREFIX = "mt:tr:"


def cacheable(params: DecodeParams, stream: bool) -> bool:
    """Deterministic answers only (no sampling without a seed); streamed requests bypass the cache."""
    return not stream and not (params.sampling and params.seed is None)


def cache_key(model: str, version: str, source: str, target: str, options: dict, params: DecodeParams, text: str):
    """The entry's key: a SHA-256 over every input of the translation."""
    parts = [model, version, source, target, options, dataclasses.asdict(params), text]
    return hashlib.sha256(msgspec.json.encode(parts)).hexdigest()


class TranslationCache:
    """get_many/put_many of per-text answers ({"text", "alternatives", "details"}), stored as msgpack bytes."""

    def __init__(self, settings: Settings, metrics: Metrics):
        self.metrics, self.ttl = metrics, settings.cache_ttl_seconds
        self.enabled = settings.cache and (settings.cache_bytes > 0 or bool(settings.redis_url))
        self.local = LRUCache(settings.cache_bytes, getsizeof=len) if settings.cache_bytes > 0 else None
        self.redis, self.dependency = None, None
        if self.enabled and settings.redis_url:
            timeout = settings.store_timeout_seconds
            self.redis = redis_client.connect(settings.redis_url, timeout)
            probe = partial(redis_client.probe, self.redis)
            self.dependency = Dependency("cache", metrics, timeout, STORE_FAILURES, probe)

    async def get_many(self, keys: list[str]) -> list[dict | None]:
        """The cached answers, None for misses; counts hits and misses."""
        found: list[bytes | None] = [self.local.get(k) if self.local is not None else None for k in keys]
        missing = [i for i, v in enumerate(found) if v is None]
        if self.redis is not None and missing:
            try:
                remote = await self.dependency.call(lambda: self.redis.mget([PREFIX + keys[i] for i in missing]))
            except Unavailable:  # a cache that is down is a miss, not an error
                remote = [None] * len(missing)
            for i, value in zip(missing, remote, strict=True):
                if value is not None:
                    found[i] = value
                    self._keep(keys[i], value)
        hits = sum(v is not None for v in found)
        self.metrics.cache_hits.inc(hits)
        self.metrics.cache_misses.inc(len(keys) - hits)
        return [None if v is None else msgspec.msgpack.decode(v) for v in found]

    def _keep(self, key: str, value: bytes) -> None:
        """Store in the LRU (an entry larger than the whole cache is skipped)."""
        if self.local is not None and len(value) <= self.local.maxsize:
            self.local[key] = value

    async def put_many(self, entries: dict[str, dict]) -> None:
        """Store answers locally and in Redis (with the entries' lifetime)."""
        if not entries:
            return
        encoded = {k: msgspec.msgpack.encode(v) for k, v in entries.items()}
        for key, value in encoded.items():
            self._keep(key, value)
        if self.redis is not None:
            try:
                await self.dependency.call(lambda: self._store(encoded))
            except Unavailable:
                pass

    async def _store(self, encoded: dict[str, bytes]) -> None:
        """Write entries to Redis in one round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for key, value in encoded.items():
                pipe.set(PREFIX + key, value, ex=self.ttl)
            await pipe.execute()

    async def close(self) -> None:
        """Close the Redis connections."""
        if self.redis is not None:
            self.dependency.close()
            await self.redis.aclose()
