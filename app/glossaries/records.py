"""A stored glossary and what the API shows of it."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from app.glossaries.entries import Entry


def new_id() -> str:
    """A fresh glossary id: random, so that ids reveal nothing of other owners' glossaries."""
    return secrets.token_hex(16)


@dataclass(frozen=True)
class Glossary:
    """Entries for one language pair, owned by an API key ("key:NAME"), or by nobody ("") when keys are off."""

    name: str
    source: str
    target: str
    entries: tuple[Entry, ...]
    owner: str = ""
    id: str = field(default_factory=new_id)
    created: float = field(default_factory=time.time)

    def info(self) -> dict:
        """Its public description (no entries): id, name, pair, entry count, creation time (ISO 8601, UTC)."""
        created = datetime.fromtimestamp(self.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return {"glossary_id": self.id, "name": self.name, "source": self.source, "target": self.target,
                "entry_count": len(self.entries), "creation_time": created}  # fmt: skip


@dataclass(frozen=True)
class Terms:
    """A request's glossary: its entries (a stored glossary's with inline ones over them) and, when a stored one was
    named, the language pair it was made for (the request must translate that pair)."""

    entries: tuple[Entry, ...]
    pair: tuple[str, str] | None = None
    glossary_id: str | None = None
