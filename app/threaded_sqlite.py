"""One SQLite file shared by every HTTP worker and server process on a machine, used from a thread of its own: WAL
mode, writes in IMMEDIATE transactions (a write lock taken up front), and every call awaited from the event loop while
the store's thread waits (up to 30 s) for a lock another process holds. The key store and the glossary store build on
it."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path


def in_thread(method: Callable) -> Callable:
    """An async method that runs `method` in the store's thread (the one that owns the connection), once it is open."""

    @functools.wraps(method)
    async def run(self: ThreadedSqlite, *args):
        def call():
            self.opened.result()  # raises here if the file could not be opened
            return method(self, *args)

        return await asyncio.get_running_loop().run_in_executor(self.thread, call)

    return run


class ThreadedSqlite:
    """One connection per store, opened and used by one thread of the store's own; subclasses name their SCHEMA."""

    SCHEMA = ""  # CREATE TABLE IF NOT EXISTS statements, separated by ";"

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{type(self).__name__}-sqlite")
        self.opened = self.thread.submit(self._open)  # the first call waits for it in the same thread

    def _open(self) -> None:
        """Connect (in the store's thread), WAL mode, tables created."""
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        with self._tx() as db:
            for statement in filter(str.strip, self.SCHEMA.split(";")):
                db.execute(statement)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: committed on success, rolled back on error."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    @in_thread
    def _close(self) -> None:
        self.db.close()

    async def close(self) -> None:
        """Close the file, then the thread."""
        try:
            await self._close()
        finally:
            self.thread.shutdown()
