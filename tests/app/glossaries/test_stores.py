"""The glossary stores (SQLite, and Redis when redis-server is installed): each owner sees only its own."""

from __future__ import annotations

import asyncio
import threading

import pytest

from app.glossaries.records import Glossary
from app.glossaries.sqlite_store import SqliteGlossaries


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "sqlite":
        return lambda: SqliteGlossaries(tmp_path / "keys.sqlite")
    from app.glossaries.redis_store import RedisGlossaries

    url = request.getfixturevalue("redis_url")
    return lambda: RedisGlossaries(url)


def test_owners_see_only_their_glossaries(store):
    # catches: get/list/delete that ignore the owner; entries or order not kept through the store
    async def run():
        s = store()
        mine = Glossary("mine", "en", "es", (("file", "fichero"), ("Firefox", "Firefox")), owner="key:a")
        theirs = Glossary("theirs", "en", "es", (("a", "b"),), owner="key:b", created=mine.created + 1)
        await s.add(mine)
        await s.add(theirs)
        try:
            assert await s.get(mine.id, "key:a") == mine
            assert await s.get(mine.id, "key:b") is None
            assert [g.id for g in await s.list("key:b")] == [theirs.id]
            assert await s.delete(mine.id, "key:b") is False
            assert await s.delete(mine.id, "key:a") is True
            assert await s.get(mine.id, "key:a") is None and await s.list("key:a") == []
        finally:
            await s.delete(theirs.id, "key:b")
            await s.close()

    asyncio.run(run())


def test_sqlite_calls_run_off_the_event_loop(tmp_path):
    # catches: sqlite3 called on the event loop's thread (a write lock held elsewhere would stall every request)
    seen = []
    s = SqliteGlossaries(tmp_path / "keys.sqlite")

    async def run():
        await s.probe()  # opens the connection
        s.db = _Spy(s.db, seen)
        await s.list("")
        await s.close()

    asyncio.run(run())
    assert seen and threading.main_thread().name not in seen


class _Spy:
    """A connection stand-in that records the thread of each call."""

    def __init__(self, db, seen):
        self._db, self._seen = db, seen

    def execute(self, *args):
        self._seen.append(threading.current_thread().name)
        return self._db.execute(*args)

    def close(self):
        self._db.close()
