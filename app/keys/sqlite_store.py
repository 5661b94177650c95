"""Keys and limit counters in one SQLite file, shared by every HTTP worker and server process on the machine: WAL
mode, and each check-and-count in one IMMEDIATE transaction (a write lock taken up front), so counts are exact. Every
call runs in the store's own thread (app.threaded_sqlite): waiting for a write lock never stalls the event loop."""

from __future__ import annotations

import math
import sqlite3
import time

from app.keys.records import LIMITS, WINDOW_S, KeyRecord, Refusal, key_hash, seconds_to_midnight, utc_day
from app.threaded_sqlite import ThreadedSqlite, in_thread

SCHEMA = """
CREATE TABLE IF NOT EXISTS keys (hash TEXT PRIMARY KEY, name TEXT UNIQUE NOT NULL, created REAL NOT NULL,
  revoked INTEGER NOT NULL DEFAULT 0, req_limit INTEGER, char_limit INTEGER, daily_char_limit INTEGER,
  batch_limit INTEGER);
CREATE TABLE IF NOT EXISTS windows (subject TEXT PRIMARY KEY, start REAL NOT NULL, count INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS daily (subject TEXT NOT NULL, day TEXT NOT NULL, requests INTEGER NOT NULL,
  chars INTEGER NOT NULL, PRIMARY KEY (subject, day));
"""


class SqliteStore(ThreadedSqlite):
    """Keys and counters: callers await its methods while its thread waits for the write lock."""

    SCHEMA = SCHEMA

    @in_thread
    def lookup(self, key: str) -> KeyRecord | None:
        """The live (not revoked) record of a key, else None."""
        row = self.db.execute(f"SELECT name, created, {', '.join(LIMITS)} FROM keys WHERE hash=? AND revoked=0",
                              (key_hash(key),)).fetchone()  # fmt: skip
        return None if row is None else KeyRecord(row[0], dict(zip(LIMITS, row[2:], strict=True)), row[1])

    @in_thread
    def consume(self, subject: str, req_limit: int, chars: int, daily_limit: int) -> Refusal | None:
        """Count one request of `chars` characters unless it is over a limit (-1: none); the refusal if it is."""
        now = time.time()
        day = utc_day(now)
        with self._tx() as db:
            window = db.execute("SELECT start, count FROM windows WHERE subject=?", (subject,)).fetchone()
            start, count = window if window and now - window[0] < WINDOW_S else (now, 0)
            if 0 <= req_limit <= count:
                return Refusal("req_limit", req_limit, max(1, math.ceil(start + WINDOW_S - now)))
            row = db.execute("SELECT chars FROM daily WHERE subject=? AND day=?", (subject, day)).fetchone()
            if 0 <= daily_limit < (row[0] if row else 0) + chars:
                return Refusal("daily_char_limit", daily_limit, seconds_to_midnight(now))
            db.execute("INSERT OR REPLACE INTO windows VALUES (?, ?, ?)", (subject, start, count + 1))
            db.execute(
                "INSERT INTO daily VALUES (?, ?, 1, ?) ON CONFLICT(subject, day) DO UPDATE SET "
                "requests=requests+1, chars=chars+excluded.chars",
                (subject, day, chars),
            )
        return None

    @in_thread
    def add(self, key: str, record: KeyRecord) -> None:
        """Store a new key (ValueError when the name or the key exists)."""
        try:
            with self._tx() as db:
                db.execute(
                    f"INSERT INTO keys (hash, name, created, {', '.join(LIMITS)}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (key_hash(key), record.name, record.created, *(record.limits.get(k) for k in LIMITS)),
                )
        except sqlite3.IntegrityError:
            raise ValueError(f"a key named {record.name!r} (or this key) exists") from None

    @in_thread
    def records(self) -> list[KeyRecord]:
        """Every key, revoked ones too, by name."""
        rows = self.db.execute(f"SELECT name, created, revoked, {', '.join(LIMITS)} FROM keys ORDER BY name")
        return [KeyRecord(r[0], dict(zip(LIMITS, r[3:], strict=True)), r[1], bool(r[2])) for r in rows]

    @in_thread
    def update(self, name: str, limits: dict[str, int | None]) -> None:
        """Change a key's overrides (None: back to the default); KeyError for an unknown name."""
        with self._tx() as db:
            for k, v in limits.items():
                if db.execute(f"UPDATE keys SET {k}=? WHERE name=?", (v, name)).rowcount == 0:
                    raise KeyError(name)

    @in_thread
    def revoke(self, name: str) -> None:
        """Refuse the key from now on (it stays listed); KeyError for an unknown name."""
        with self._tx() as db:
            if db.execute("UPDATE keys SET revoked=1 WHERE name=?", (name,)).rowcount == 0:
                raise KeyError(name)

    @in_thread
    def usage(self, subject: str) -> dict[str, int]:
        """Requests in the current minute window, characters today, and totals (one row per day is kept)."""
        now = time.time()
        window = self.db.execute("SELECT start, count FROM windows WHERE subject=?", (subject,)).fetchone()
        day = self.db.execute("SELECT chars FROM daily WHERE subject=? AND day=?", (subject, utc_day(now))).fetchone()
        total = self.db.execute("SELECT SUM(requests), SUM(chars) FROM daily WHERE subject=?", (subject,)).fetchone()
        return {"requests_last_minute": window[1] if window and now - window[0] < WINDOW_S else 0,
                "chars_today": day[0] if day else 0, "requests_total": total[0] or 0,
                "chars_total": total[1] or 0}  # fmt: skip
