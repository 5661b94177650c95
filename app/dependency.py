"""What requests depend on besides the engine: the key and limit store, the translation cache's Redis, the glossary
store and the document store. Every call runs within a time budget. A failed call starts an outage: one log line,
mt_dependency_up 0, and until it ends every call is refused at once (503 `unavailable` with Retry-After, 507
`insufficient_storage` for a full disk) while a background probe tries again with backoff; the probe's first success
ends it (one more log line). What a refusal means is the caller's policy: the key store fails closed, the cache turns
it into a miss."""

from __future__ import annotations

import asyncio
import errno
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.exceptions import RedisError

from app.errors import ApiError
from app.metrics import Metrics

log = logging.getLogger("mt.dependency")
T = TypeVar("T")
FIRST_RETRY_S, MAX_RETRY_S = 0.05, 1.0  # the probe's backoff (doubling): a recovery is seen within a second
FRESH_S = 1.0  # readiness probes a dependency that has not answered for this long
FULL = (errno.ENOSPC, errno.EDQUOT)
# a store's own failures: Redis's or SQLite's, the system's, and RuntimeError, which uvloop raises when redis-py writes
# to a connection that Redis closed under it
STORE_FAILURES = (RedisError, sqlite3.DatabaseError, OSError, RuntimeError)


class Unavailable(ApiError):
    """A dependency that is down, in the contract's words: 503 `unavailable` naming it, or 507 for a full disk."""


def describe(exc: BaseException, timeout: float) -> str:
    """A failure in a few words for clients (no addresses or paths): its kind, or the budget it ran over."""
    if isinstance(exc, TimeoutError) and not str(exc):
        return f"no answer within {timeout:g}s"
    if isinstance(exc, OSError) and exc.errno in FULL:
        return "no space left on device"
    return type(exc).__name__


class Dependency:
    """One dependency's health, as this process sees it: `call` runs work on it, `check` probes it."""

    def __init__(
        self,
        name: str,
        metrics: Metrics,
        timeout: float,
        failures: tuple[type[BaseException], ...],
        probe: Callable[[], Awaitable[Any]],
    ):
        self.name, self.label, self.timeout = name, name.replace("_", " "), timeout
        self.failures = (TimeoutError, *failures)  # what counts as the dependency failing (not a caller's mistake)
        self.probe = probe
        self.outage: str | None = None  # why it is down; None while up
        self.full = False  # the outage is a full disk
        self.since = 0.0
        self.answered = float("-inf")  # when it last answered (monotonic)
        self.probing = False
        self.retrying: asyncio.Task | None = None
        self.up_gauge = metrics.dependency_up.labels(name)
        self.errors = metrics.dependency_errors.labels(name)
        self.up_gauge.set(1)

    @property
    def up(self) -> bool:
        """No outage is known."""
        return self.outage is None

    def require(self) -> None:
        """Raise the refusal at once while it is down."""
        if self.outage is not None:
            raise self.refusal()

    async def call(self, work: Callable[[], Awaitable[T]]) -> T:
        """work() within the budget; Unavailable at once while down, or when this call fails (an outage starts)."""
        self.require()
        try:
            async with asyncio.timeout(self.timeout):
                result = await work()
        except self.failures as exc:
            self.failed(exc)
            raise self.refusal() from None
        self.answered = time.monotonic()
        return result

    async def check(self) -> bool:
        """Probe it now, within the budget: True when it answers (ending an outage), else False."""
        self.probing = True
        try:
            async with asyncio.timeout(self.timeout):
                await self.probe()
        except self.failures as exc:
            self.failed(exc)
            return False
        finally:
            self.probing = False
        self.answered = time.monotonic()
        if self.outage is not None:
            log.warning("%s is back after %.1fs", self.label, time.monotonic() - self.since)
            self.outage, self.full = None, False
            self.up_gauge.set(1)
        return True

    async def refresh(self) -> None:
        """For readiness: probe it if it is up but has not answered for FRESH_S (while down, the retries probe)."""
        if self.outage is None and not self.probing and time.monotonic() - self.answered > FRESH_S:
            await self.check()

    def failed(self, exc: BaseException) -> None:
        """Count a failure; the first one of an outage logs it and starts the retries."""
        self.errors.inc()
        if self.outage is not None:
            return
        self.outage, self.since = describe(exc, self.timeout), time.monotonic()
        self.full = isinstance(exc, OSError) and exc.errno in FULL
        self.up_gauge.set(0)
        status = 507 if self.full else 503
        log.error("%s unavailable: %s: %s (requests that need it get %d until it is back)", self.label,
                  type(exc).__name__, exc or self.outage, status)  # fmt: skip
        self.retrying = asyncio.get_running_loop().create_task(self._retry())

    async def _retry(self) -> None:
        """Probe with backoff until it answers."""
        wait = FIRST_RETRY_S
        while True:
            await asyncio.sleep(wait)
            if await self.check():
                return
            wait = min(2 * wait, MAX_RETRY_S)

    def refusal(self) -> Unavailable:
        """The error a request that needs it gets while it is down."""
        if self.full:
            message = f"{self.label} is full ({self.outage}); retry later"
            return Unavailable(507, "insufficient_storage", message, {"Retry-After": "30"})
        return Unavailable(503, "unavailable", f"{self.label} unavailable ({self.outage}); retry later",
                           {"Retry-After": str(round(MAX_RETRY_S))})  # fmt: skip

    def close(self) -> None:
        """Stop the retries."""
        if self.retrying is not None:
            self.retrying.cancel()


class Guarded:
    """A store whose every method call runs through a Dependency of its own; the store is opened on first use (in
    the process that uses it), inside the first call, so that failing to open it is an outage too."""

    def __init__(self, name: str, opener: Callable[[], Any], metrics: Metrics, timeout: float):
        self.opener = opener
        self._store: Any = None
        self.dependency = Dependency(name, metrics, timeout, STORE_FAILURES, self.probe)

    @property
    def store(self) -> Any:
        """The store itself, opened on first use."""
        if self._store is None:
            self._store = self.opener()
        return self._store

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        """The store's async method `name`, guarded."""
        if name.startswith("_"):
            raise AttributeError(name)

        async def guarded(*args: Any, **kwargs: Any) -> Any:
            return await self.dependency.call(lambda: getattr(self.store, name)(*args, **kwargs))

        return guarded

    async def probe(self) -> None:
        """The store's own probe (a small write)."""
        await self.store.probe()

    async def close(self) -> None:
        """Stop the retries; close the store if it was opened."""
        self.dependency.close()
        if self._store is not None:
            await self._store.close()
