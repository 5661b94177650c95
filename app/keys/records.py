"""What the stores hold: key records (the key itself only as its hash) and the verdict of an admission."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

LIMITS = ("req_limit", "char_limit", "daily_char_limit", "batch_limit")  # per-key overrides of the defaults
# req_limit counts requests in windows of a minute, each starting at the first request after the last one ended: exact
# and O(1) per request (a moving log, as LibreTranslate's limiter keeps, costs O(limit) at high limits)
WINDOW_S = 60


def key_hash(key: str) -> str:
    """SHA-256 of a key: keys are random and long (192 bits), so a fast hash is safe at rest (no salt, no KDF)."""
    return hashlib.sha256(key.encode()).hexdigest()


def utc_day(now: float) -> str:
    """The UTC date that daily counters belong to."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")


def seconds_to_midnight(now: float) -> int:
    """Whole seconds until the daily counters start again (at least 1)."""
    today = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(1, int((today + timedelta(days=1)).timestamp() - now) + 1)


@dataclass
class KeyRecord:
    """An API key as the operator sees it: its name, its limit overrides (None: the server's default)."""

    name: str
    limits: dict[str, int | None] = field(default_factory=dict)
    created: float = field(default_factory=time.time)
    revoked: bool = False

    def public(self) -> dict:
        """For listings (JSON)."""
        return {"name": self.name, **{k: self.limits.get(k) for k in LIMITS}, "created": self.created,
                "revoked": self.revoked}  # fmt: skip


@dataclass
class Refusal:
    """Why a request is over a rate limit, the limit, and when to retry (seconds)."""

    reason: str
    limit: int
    retry_after: int
