"""Admission of a request: its API key (when keys are required) and its limits, checked and counted at once in the
store (the routes' FastAPI dependency is app.api.deps.Admitted). The store fails closed: while it cannot answer within
its budget, every limited request gets 503 `unavailable` with Retry-After (app.dependency), never a pass unchecked."""

from __future__ import annotations

from cachetools import TTLCache

from app.dependency import Guarded
from app.errors import ApiError
from app.keys.records import LIMITS, KeyRecord
from app.metrics import Metrics
from app.settings import Settings


def open_store(settings: Settings):
    """The store the settings name: Redis when redis_url is set, else the SQLite file keys_db (its busy timeout a
    little under the budget, so that a lock held too long is reported as such)."""
    if settings.redis_url:
        from app.keys.redis_store import RedisStore

        return RedisStore(settings.redis_url, settings.store_timeout_seconds)
    from app.keys.sqlite_store import SqliteStore

    return SqliteStore(settings.keys_db, 0.9 * settings.store_timeout_seconds)


RECORD_TTL_S = 1.0  # a worker reuses a key's record this long: a revocation or a new limit applies within a second


class Limiter:
    """Checks keys and limits; does nothing (and opens no store) when keys are off and no limit is set. Counting is
    always in the store (atomic there); valid keys' records are kept a second, saving a round trip to Redis."""

    def __init__(self, settings: Settings, metrics: Metrics):
        self.settings, self.metrics = settings, metrics
        self.defaults = {k: getattr(settings, k) for k in LIMITS}
        self.active = settings.api_keys or any(v >= 0 for v in self.defaults.values())
        self.store = Guarded("key_store", lambda: open_store(settings), metrics, settings.store_timeout_seconds)
        self.dependency = self.store.dependency
        self.records: TTLCache[str, KeyRecord] = TTLCache(maxsize=10_000, ttl=RECORD_TTL_S)

    def _refuse(self, reason: str, status: int, error_type: str, message: str, headers: dict | None = None):
        self.metrics.limit_rejections.labels(reason).inc()
        return ApiError(status, error_type, message, headers, reason)

    async def record(self, api_key: str) -> KeyRecord | None:
        """The live record of a key (kept a second), else None."""
        record = self.records.get(api_key)
        if record is None:
            record = await self.store.lookup(api_key)
        if record is not None:
            self.records[api_key] = record
        return record

    async def chars_today(self, subject: str) -> int:
        """Characters counted today against a subject's daily limit (0 when nothing is counted: no keys, no limits)."""
        return (await self.store.usage(subject))["chars_today"] if self.active else 0

    async def limits_for(self, api_key: object, client: str) -> tuple[str, dict[str, int]]:
        """(subject counted, its limits): the key's name and overrides, or the client's address and the defaults."""
        if not self.settings.api_keys:
            return f"ip:{client}", self.defaults
        if not api_key or not isinstance(api_key, str):
            raise self._refuse("missing_key", 403, "forbidden", "api_key: an API key is required on this server")
        record = await self.record(api_key)
        if record is None:
            raise self._refuse("invalid_key", 403, "forbidden", "api_key: invalid API key")
        overrides = {k: v for k, v in record.limits.items() if v is not None}
        return f"key:{record.name}", {**self.defaults, **overrides}

    async def admit(self, api_key: object, client: str, texts: list[str]) -> None:
        """Pass, or raise 403 (key), 422 (batch_limit, char_limit) or 429 with Retry-After (req_limit,
        daily_char_limit); an admitted request counts against its limits."""
        if not self.active:
            return
        subject, limits = await self.limits_for(api_key, client)
        chars = sum(len(t) for t in texts)
        if 0 <= limits["batch_limit"] < len(texts):
            raise self._refuse("batch_limit", 422, "validation",
                               f"q: {len(texts)} texts exceeds batch_limit={limits['batch_limit']}")  # fmt: skip
        if 0 <= limits["char_limit"] < chars:
            raise self._refuse("char_limit", 422, "validation",
                               f"q: {chars} characters exceeds char_limit={limits['char_limit']}")  # fmt: skip
        refusal = await self.store.consume(subject, limits["req_limit"], chars, limits["daily_char_limit"])
        if refusal is not None:
            what = "requests per minute" if refusal.reason == "req_limit" else "characters per day"
            message = f"{refusal.reason}={refusal.limit} {what} reached; retry in {refusal.retry_after}s"
            raise self._refuse(refusal.reason, 429, "rate_limited", message, {"Retry-After": str(refusal.retry_after)})

    async def close(self) -> None:
        """Close the store if it was opened."""
        await self.store.close()
