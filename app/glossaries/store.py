"""Where glossaries are kept: the protocol every store follows, and the store the settings name (Redis when
redis_url is set, else the SQLite file of keys_db, beside the keys). While the store is down (app.dependency), a
request that names a stored glossary, or manages one, gets 503 `unavailable`; the others never call it."""

from __future__ import annotations

from typing import Protocol

from app.dependency import Guarded
from app.glossaries.entries import Limits
from app.glossaries.records import Glossary
from app.metrics import Metrics
from app.settings import Settings


class GlossaryStore(Protocol):
    """Glossaries by id, each visible only to its owner; every call is awaited (none blocks the event loop)."""

    async def add(self, glossary: Glossary) -> None:
        """Store a glossary whole (or nothing)."""

    async def get(self, glossary_id: str, owner: str) -> Glossary | None:
        """The owner's glossary with this id, else None (unknown and another owner's look the same)."""

    async def list(self, owner: str) -> list[Glossary]:
        """The owner's glossaries, oldest first."""

    async def delete(self, glossary_id: str, owner: str) -> bool:
        """Delete the owner's glossary; False when the owner has none with this id."""

    async def probe(self) -> None:
        """A small write (the dependency's health check)."""

    async def close(self) -> None:
        """Release connections."""


def open_store(settings: Settings) -> GlossaryStore:
    """The store the settings name: Redis when redis_url is set, else the SQLite file keys_db."""
    if settings.redis_url:
        from app.glossaries.redis_store import RedisGlossaries

        return RedisGlossaries(settings.redis_url, settings.store_timeout_seconds)
    from app.glossaries.sqlite_store import SqliteGlossaries

    return SqliteGlossaries(settings.keys_db, 0.9 * settings.store_timeout_seconds)


class Glossaries:
    """The service's glossaries: the limits, and the store (opened on first use, in the worker process using it;
    every call within the store's budget)."""

    def __init__(self, settings: Settings, metrics: Metrics):
        self.settings = settings
        self.limits = Limits(settings.glossary_max_entries, settings.glossary_max_entry_bytes,
                             settings.glossary_max_bytes)  # fmt: skip
        self.store: GlossaryStore = Guarded("glossary_store", lambda: open_store(settings), metrics,
                                            settings.store_timeout_seconds)  # fmt: skip

    async def close(self) -> None:
        """Close the store if it was opened."""
        await self.store.close()
