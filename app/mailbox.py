"""Engine threads hand events to the asyncio loop: one wake-up per burst, not one per event."""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

log = logging.getLogger("mt.mailbox")
_boxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Mailbox] = weakref.WeakKeyDictionary()


class Mailbox:
    """Calls posted from any thread run on one loop, in order; a decode step's events for every request
    on the loop cost a single `call_soon_threadsafe` (one self-pipe write and one loop wake-up)."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = weakref.ref(loop)  # weak: the registry's key must not be kept alive by its own value
        self.lock = threading.Lock()
        self.pending: list[tuple[Callable[[Any], None], Any]] = []

    def post(self, fn: Callable[[Any], None], arg: Any) -> None:
        """Run fn(arg) on the loop soon."""
        with self.lock:
            self.pending.append((fn, arg))
            if len(self.pending) > 1:  # a drain is already scheduled and will see this one
                return
        loop = self.loop()
        if loop is not None:
            loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        """On the loop: run everything posted so far."""
        with self.lock:
            calls, self.pending = self.pending, []
        for fn, arg in calls:
            try:
                fn(arg)
            except Exception:  # one bad listener must not cost the others their events
                log.exception("event delivery failed")


def mailbox(loop: asyncio.AbstractEventLoop) -> Mailbox:
    """The loop's mailbox (created on first use)."""
    box = _boxes.get(loop)
    if box is None:
        box = _boxes[loop] = Mailbox(loop)
    return box
