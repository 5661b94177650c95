"""One HTTP translation job: texts cut into units, one engine request per unit, events back in order."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from app.engine.engine import Overloaded
from app.engine.request import EngineRequest, Event, Failed, Finished, Token
from app.errors import ApiError
from app.mailbox import mailbox
from app.service import ModelEntry
from app.text import Layout
from model.params import DecodeParams
from model.tokenizer import IncrementalDetokenizer


@dataclass
class Unit:
    """A piece of one text that the model translates by itself."""

    ids: list[int]
    request: EngineRequest | None = None
    result: Finished | None = None
    detok: IncrementalDetokenizer | None = None
    buffered: list[str] = field(default_factory=list)


@dataclass
class Item:
    """One text of `q`: its layout, its units, and streaming progress."""

    layout: Layout
    units: list[Unit]
    cursor: int = 0  # next layout piece to stream
    streamed: str = ""

    @property
    def finished(self) -> bool:
        """Every unit has its result."""
        return all(u.result is not None for u in self.units)


class Job:
    """Submits an HTTP request's units to one engine and turns engine events into text."""

    def __init__(
        self,
        entry: ModelEntry,
        layouts: list[Layout],
        params: DecodeParams,
        max_input_tokens: int,
        prefix: list[int] = (),
        detected: dict | None = None,
    ):
        self.entry, self.params = entry, params
        self.tokenizer = entry.checkpoint.tokenizer
        self.prefix, self.detected = list(prefix), detected  # language tokens before each unit; source "auto"
        self.queue: asyncio.Queue[tuple[int, int, Event]] = asyncio.Queue()
        self.items = [Item(lay, self._units(i, lay, max_input_tokens)) for i, lay in enumerate(layouts)]
        self.streams_tokens = params.beam_size == 1

    def _units(self, index: int, layout: Layout, limit: int) -> list[Unit]:
        """Tokenize every unit and enforce max_input_tokens, naming the text."""
        units = []
        for text in layout.units:
            ids = self.prefix + self.tokenizer.encode(text)
            if len(ids) > limit:
                hint = "" if len(layout.units) > 1 else "; set parameters.split_sentences=true or send shorter texts"
                raise ApiError(
                    422, "validation", f"q[{index}]: {len(ids)} tokens exceeds max_input_tokens={limit}{hint}"
                )
            units.append(Unit(ids, detok=self.tokenizer.detokenizer()))
        return units

    def submit(self) -> None:
        """Queue every unit on the engine at once, or none (503 overloaded, Retry-After)."""
        post = mailbox(asyncio.get_running_loop()).post
        for i, item in enumerate(self.items):
            for u, unit in enumerate(item.units):
                emit = lambda ev, i=i, u=u: post(self.queue.put_nowait, (i, u, ev))
                unit.request = EngineRequest(unit.ids, self.params, emit)
        try:
            self.entry.engine.submit(*(unit.request for item in self.items for unit in item.units))
        except Overloaded as exc:
            raise ApiError(503, "overloaded", f"server overloaded: {exc}; retry later", {"Retry-After": "1"}) from None

    def abort(self) -> None:
        """Stop every unit still queued or running (client gone, or a sibling failed)."""
        for item in self.items:
            for unit in item.units:
                if unit.request is not None and unit.result is None:
                    self.entry.engine.abort(unit.request)

    @property
    def finished(self) -> bool:
        """Every unit of every item has a result."""
        return all(item.finished for item in self.items)

    async def next_event(self, timeout: float) -> tuple[int, int, Event]:
        """The next engine event as (item, unit, event); TimeoutError after `timeout` seconds of silence."""
        if not self.queue.empty():
            return self.queue.get_nowait()
        async with asyncio.timeout(timeout):  # no task per event, unlike wait_for on Python 3.11
            return await self.queue.get()

    def start(self) -> list[tuple[int, str]]:
        """Literal text before each item's first unit (all of it when the item has none), as (index, text)."""
        return [(i, delta) for i, item in enumerate(self.items) if (delta := self._advance(item))]

    def apply(self, i: int, u: int, event: Event) -> str:
        """Record an engine event; return the text it adds to item i's stream (in layout order)."""
        item, unit = self.items[i], self.items[i].units[u]
        if isinstance(event, Failed):
            status = 503 if event.error_type == "not_ready" else 500
            raise ApiError(status, event.error_type, f"q[{i}]: {event.message}")
        if isinstance(event, Token):
            unit.buffered.append(unit.detok.push(event.token_id))
        elif isinstance(event, Finished):
            if event.finish_reason == "aborted":
                raise ApiError(503, "not_ready", f"q[{i}]: request aborted")
            unit.result = event
            if not unit.detok.ids:  # beams stream nothing: the whole text arrives now
                unit.detok.ids = list(event.hypotheses[0].tokens)
            unit.buffered.append(unit.detok.flush())
        return self._advance(item)

    def _advance(self, item: Item) -> str:
        """Stream literal pieces and buffered unit text as far as the first unfinished unit."""
        out = []
        pieces = item.layout.pieces
        while item.cursor < len(pieces):
            piece = pieces[item.cursor]
            if isinstance(piece, str):
                out.append(piece)
                item.cursor += 1
                continue
            unit = item.units[piece]
            out.extend(item.layout.render(t) for t in unit.buffered)
            unit.buffered.clear()
            if unit.result is None:
                break
            item.cursor += 1
        delta = "".join(out)
        item.streamed += delta
        return delta

    def texts(self, item: Item, rank: int = 0) -> str:
        """The item's translation using each unit's hypothesis `rank` (best when it has fewer)."""
        outs = []
        for unit in item.units:
            hyps = unit.result.hypotheses
            outs.append(self.tokenizer.decode(hyps[min(rank, len(hyps) - 1)].tokens))
        return item.layout.join(outs)
