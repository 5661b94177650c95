"""The front's service: the engine cores it talks to, routing by language pair, readiness and draining."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from app.cache import TranslationCache
from app.engine.card import Description, ModelCard
from app.engine.client import EngineClient
from app.errors import ApiError
from app.glossaries.store import Glossaries
from app.keys.access import Limiter
from app.languages import Detector, unserved
from app.metrics import Metrics
from app.settings import Settings

log = logging.getLogger("mt.service")


@dataclass
class ModelEntry:
    """A served model: its card (everything but the weights) and the client of the core that runs it."""

    card: ModelCard
    engine: EngineClient

    @property
    def checkpoint(self) -> Description:
        """The checkpoint without its weights: tokenizer, languages, generation defaults, architecture."""
        return self.card.description


@dataclass
class Route:
    """Where a request goes: the model, its source language, and how that was detected (source "auto") if it was."""

    entry: ModelEntry
    source: str
    detected: dict | None = None


class Service:
    """Owns the engine clients and readiness; the HTTP layer reaches everything through it."""

    def __init__(self, settings: Settings, cores: list[str] | None = None):
        self.settings, self.metrics = settings, Metrics()
        self.clients = [EngineClient(address) for address in cores or []]
        self.draining = False
        self.inflight = 0
        self.started = time.time()
        self.detector = Detector()
        self.limiter = Limiter(settings, self.metrics)
        self.cache = TranslationCache(settings, self.metrics)
        self.glossaries = Glossaries(settings, self.metrics)
        self.documents = None  # the store of translated files (app.documents.store), made by its first user
        self.abort_connection: Callable[[dict], None] = lambda scope: None  # the HTTP server's (app.worker)

    async def start(self) -> None:
        """Connect to every engine core (they may still be loading); load the language detector meanwhile."""
        threading.Thread(target=self._load_detector, name="detector", daemon=True).start()
        await asyncio.gather(*(c.start() for c in self.clients))

    def _load_detector(self) -> None:
        """Load the language detector; a failure is logged (and makes the service broken: `broken` says why)."""
        try:
            self.detector.load()
        except Exception:
            log.exception("the language detector failed to load")

    async def stop(self) -> None:
        """Close the connections."""
        if self.documents is not None:
            self.documents.dependency.close()
        await asyncio.gather(*(c.close() for c in self.clients), self.limiter.close(), self.cache.close(),
                             self.glossaries.close())  # fmt: skip

    @property
    def models(self) -> dict[str, ModelEntry]:
        """The models whose cores serve, by name."""
        return {c.card.name: ModelEntry(c.card, c) for c in self.clients if c.card is not None}

    @property
    def loaded(self) -> bool:
        """Every core has loaded and warmed up its model, and the language detector is loaded."""
        return all(c.card is not None for c in self.clients) and self.detector.loaded

    def broken(self) -> str | None:
        """Why this process can never serve again (an engine core died, two serve one pair, the language detector
        failed to load), else None."""
        if self.detector.failed is not None:
            return f"language detector failed to load: {self.detector.failed}"
        dead = [c.card.name if c.card else c.address for c in self.clients if c.dead]
        if dead:
            return f"engine stopped: {', '.join(dead)}"
        names = [c.card.name for c in self.clients if c.card is not None]
        if len(set(names)) < len(names):
            return f"model loading failed: two models serve {sorted(n for n in names if names.count(n) > 1)[0]}"
        return None

    def readiness(self) -> tuple[bool, str]:
        """(ready, reason): loaded, warmed up, every engine core alive, not draining, and the key store (that every
        request needs when keys or limits are on) up."""
        if (why := self.broken()) is not None:
            return False, why
        if not self.loaded:
            return False, "loading models"
        if self.draining:
            return False, "draining"
        if self.limiter.active and not (keys := self.limiter.dependency).up:
            return False, f"{keys.label} unavailable ({keys.outage})"
        return True, "ready"

    async def check_dependencies(self) -> None:
        """Probe the dependencies that readiness depends on, if they have not answered for a second."""
        if self.limiter.active:
            await self.limiter.dependency.refresh()

    def require_ready(self) -> None:
        """Raise 503 not_ready unless the service accepts work."""
        ok, reason = self.readiness()
        if not ok:
            raise ApiError(503, "not_ready", f"not ready: {reason}", {"Retry-After": "5"})

    def pairs(self) -> list[tuple[str, str]]:
        """Every (source, target) some loaded model serves."""
        return sorted({pair for m in self.models.values() for pair in m.checkpoint.languages.pairs()})

    def sources_into(self, target: str) -> list[str]:
        """Source languages that some model translates into `target`."""
        return sorted({s for s, t in self.pairs() if t == target})

    def route(self, source: str, target: str, texts: list[str] = ()) -> Route:
        """The model for source->target; source "auto" is the language of the texts together, among the sources
        served into `target` (400 unsupported_language for a pair no model serves: LibreTranslate's "xx is not
        supported", then the side and the pairs served)."""
        pairs = self.pairs()
        if (why := unserved(pairs, source, target)) is not None:
            raise ApiError(400, "unsupported_language", why)
        detected = self._detect(texts, target) if source == "auto" else None
        source = detected["language"] if detected else source
        entry = next(m for m in self.models.values() if m.checkpoint.languages.serves(source, target))
        return Route(entry, source, detected)

    def _detect(self, texts: list[str], target: str) -> dict:
        """The texts' language among the sources served into `target` (the only one without detection); 400 when
        the detector knows none of several."""
        candidates = self.sources_into(target)  # not empty: route() refused targets no model serves
        found = self.detector.rank(" ".join(texts), candidates, top=1)
        if found:
            return found[0]
        raise ApiError(
            400,
            "unsupported_language",
            f"source 'auto': the language detector knows none of the sources served into '{target}' "
            f"({', '.join(candidates)}); set source to one of them",
        )

    def hold(self) -> Callable[[], None]:
        """Count one request's work in flight (draining waits for it); the function returned ends the count, once
        however often it is called."""
        self.inflight += 1
        counted = True

        def release() -> None:
            nonlocal counted
            if counted:
                counted = False
                self.inflight -= 1

        return release

    @contextlib.contextmanager
    def in_flight(self) -> Iterator[None]:
        """`hold` for the time of a block."""
        release = self.hold()
        try:
            yield
        finally:
            release()

    def wait_drained(self, timeout: float) -> None:
        """Block until in-flight HTTP requests finish or `timeout` passes."""
        deadline = time.monotonic() + timeout
        while self.inflight > 0 and time.monotonic() < deadline:
            time.sleep(0.05)
