"""One SQLite file shared by every HTTP worker and server process on a machine, used from a thread of its own: WAL
mode, writes in IMMEDIATE transactions (a write lock taken up front), and every call awaited from the event loop while
the store's thread waits (up to `timeout` seconds, SQLite's busy timeout) for a lock another process holds. The
connection is opened on the first call and again after a failure (a file that was read-only, or could not be opened,
may be writable now). The key store and the glossary store build on it."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")  # another connection holds the lock: the connection itself is fine


def in_thread(method: Callable) -> Callable:
    """An async method that runs `method` in the store's thread (the one that owns the connection), opening the
    connection first if needed; a failure other than a busy lock or a constraint closes it, to be opened again."""

    @functools.wraps(method)
    async def run(self: ThreadedSqlite, *args):
        def call():
            self.connect()
            try:
                return method(self, *args)
            except sqlite3.IntegrityError:
                raise
            except sqlite3.Error as exc:
                if getattr(exc, "sqlite_errorname", "") not in BUSY:
                    self.disconnect()
                raise

        return await asyncio.get_running_loop().run_in_executor(self.thread, call)

    return run


class ThreadedSqlite:
    """One connection per store, opened and used by one thread of the store's own; subclasses name their SCHEMA."""

    SCHEMA = ""  # CREATE TABLE IF NOT EXISTS statements, separated by ";"
    PROBE = "CREATE TABLE IF NOT EXISTS health_probe (id INTEGER PRIMARY KEY, at REAL NOT NULL)"  # written by probe()

    def __init__(self, path: str | Path, timeout: float = 30.0):
        self.path, self.timeout = Path(path), timeout
        self.db: sqlite3.Connection | None = None
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{type(self).__name__}-sqlite")

    def connect(self) -> sqlite3.Connection:
        """The connection (in the store's thread): opened if it is not, WAL mode, tables created."""
        if self.db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute("BEGIN IMMEDIATE")
                for statement in filter(str.strip, f"{self.SCHEMA};{self.PROBE}".split(";")):
                    db.execute(statement)
                db.execute("COMMIT")
            except BaseException:
                db.close()
                raise
            self.db = db
        return self.db

    def disconnect(self) -> None:
        """Close the connection (in the store's thread); the next call opens it again."""
        if self.db is not None:
            self.db.close()
            self.db = None

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: committed on success, rolled back on error."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            if self.db.in_transaction:  # SQLite may have rolled it back itself (a full disk)
                self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    @in_thread
    def probe(self) -> None:
        """A write of one row (the dependency's health check): the file opens, the write lock comes within the busy
        timeout, and the disk takes a write."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO health_probe VALUES (1, ?)", (time.time(),))

    async def close(self) -> None:
        """Close the file, then the thread."""
        try:
            await asyncio.get_running_loop().run_in_executor(self.thread, self.disconnect)
        finally:
            self.thread.shutdown()
