"""Glossaries in the SQLite file of the keys: one row each (entries as JSON), written in one transaction."""

from __future__ import annotations

import msgspec

from app.glossaries.records import Glossary
from app.threaded_sqlite import ThreadedSqlite, in_thread

COLUMNS = "id, owner, name, source, target, created, entries"


def _glossary(row: tuple) -> Glossary:
    entries = tuple(tuple(e) for e in msgspec.json.decode(row[6]))
    return Glossary(row[2], row[3], row[4], entries, owner=row[1], id=row[0], created=row[5])


class SqliteGlossaries(ThreadedSqlite):
    """The GlossaryStore over one SQLite file (keys_db), every call in the store's thread."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS glossaries (id TEXT PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL,
      source TEXT NOT NULL, target TEXT NOT NULL, created REAL NOT NULL, entries TEXT NOT NULL);
    CREATE INDEX IF NOT EXISTS glossaries_owner ON glossaries (owner, created)
    """

    @in_thread
    def add(self, glossary: Glossary) -> None:
        g = glossary
        row = (g.id, g.owner, g.name, g.source, g.target, g.created, msgspec.json.encode(g.entries).decode())
        with self._tx() as db:
            db.execute(f"INSERT INTO glossaries ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", row)

    @in_thread
    def get(self, glossary_id: str, owner: str) -> Glossary | None:
        row = self.db.execute(f"SELECT {COLUMNS} FROM glossaries WHERE id=? AND owner=?", (glossary_id, owner))
        found = row.fetchone()
        return None if found is None else _glossary(found)

    @in_thread
    def list(self, owner: str) -> list[Glossary]:
        rows = self.db.execute(f"SELECT {COLUMNS} FROM glossaries WHERE owner=? ORDER BY created, id", (owner,))
        return [_glossary(r) for r in rows]

    @in_thread
    def delete(self, glossary_id: str, owner: str) -> bool:
        with self._tx() as db:
            return db.execute("DELETE FROM glossaries WHERE id=? AND owner=?", (glossary_id, owner)).rowcount > 0
