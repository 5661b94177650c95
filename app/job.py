"""One HTTP translation job: texts cut into units, one engine request per unit, events back in order."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from app.casing import Casing
from app.engine.client import EngineGone, Overloaded
from app.engine.messages import Result, WireUnit
from app.errors import ApiError
from app.inline import Placed, place, source_words, target_words
from app.layout import Layout
from app.service import ModelEntry
from model.loading.tokenizer import IncrementalDetokenizer
from model.runner.params import DecodeParams

Event = int | Result  # a new token, or the unit's result


class TooLong(ApiError):
    """A unit over max_input_tokens: 422 naming the text; its `tokens` and the `limit` for callers that say it
    their own way."""

    def __init__(self, index: int, tokens: int, limit: int, whole: bool):
        hint = "; send shorter sentences (parameters.split_sentences cuts texts at sentence ends)" if whole else ""
        super().__init__(422, "validation", f"q[{index}]: {tokens} tokens exceeds max_input_tokens={limit}{hint}")
        self.tokens, self.limit = tokens, limit


@dataclass
class Unit:
    """A piece of one text that the model translates by itself."""

    ids: list[int]
    params: DecodeParams | None = None  # its own decoding parameters (a glossary's constraints), else the job's
    text: str = ""  # as the model reads it (`casing`'s model text)
    casing: Casing = field(default_factory=Casing)
    id: int = 0  # the engine's id for it, once submitted
    result: Result | None = None
    detok: IncrementalDetokenizer | None = None  # streamed jobs only
    buffered: list[str] = field(default_factory=list)


@dataclass
class Item:
    """One text of `q`: its layout, its units, and streaming progress."""

    layout: Layout
    units: list[Unit]
    cursor: int = 0  # next layout piece to stream
    streamed: str = ""
    placed: dict[tuple[int, int], Placed] = field(default_factory=dict)  # (unit, rank) -> its markup put back

    @property
    def fallbacks(self) -> int:
        """Tags of the best translation not placed by alignment (kept today's way, or placed by proportion)."""
        return self.layout.fallbacks + sum(p.fallbacks for (_, rank), p in self.placed.items() if rank == 0)

    @property
    def finished(self) -> bool:
        """Every unit has its result."""
        return all(u.result is not None for u in self.units)


class Job:
    """Submits an HTTP request's units to one engine core and turns its events into text. Only a job that streams
    gets (and detokenizes) tokens as they come (a beam search's once they are stable; a unit with markup or glossary
    terms whole, with its result, as the answer has it); the others get each unit's result once."""

    def __init__(
        self,
        entry: ModelEntry,
        layouts: list[Layout],
        params: DecodeParams,
        max_input_tokens: int,
        stream: bool = False,
        prefix: list[int] = (),
        detected: dict | None = None,
        unit_params: Callable[[str], DecodeParams] | None = None,
        agreed: Callable[[str, str], str] | None = None,
        casing: str = "",
    ):
        self.entry, self.params = entry, params
        self.unit_params = unit_params  # a unit's own parameters, from its text (a glossary's constraints)
        self.agreed = agreed  # a unit's translation with the words after its terms agreeing
        self.tokenizer = entry.checkpoint.tokenizer
        self.casing = casing  # the forms of the source's casing read in sentence case (app.casing)
        self.prefix, self.detected = list(prefix), detected  # language tokens before each unit; source "auto"
        self.arrival = time.monotonic()
        self.queue: asyncio.Queue[tuple[int, int, Event]] = asyncio.Queue()
        self.stream = stream
        self.items = [Item(lay, self._units(i, lay, max_input_tokens)) for i, lay in enumerate(layouts)]
        self.where: dict[int, tuple[int, int]] = {}  # engine unit id -> (item, unit)

    def _units(self, index: int, layout: Layout, limit: int) -> list[Unit]:
        """Tokenize every unit and enforce max_input_tokens, naming the text."""
        units = []
        for u, typed in enumerate(layout.units):
            casing = Casing.of(typed, self.casing) if u not in layout.tagged else Casing()
            text = casing.model_text(typed)
            ids = self.prefix + self.tokenizer.encode(text)
            if len(ids) > limit:
                raise TooLong(index, len(ids), limit, whole=len(layout.units) == 1)
            own = self.unit_params(text) if self.unit_params is not None else self.params
            if u in layout.tagged:  # its tags go back by alignment, once the unit is finished
                own = dataclasses.replace(own, align=True)
            held = u in layout.tagged or own.revisable  # its text comes whole: markup put back, glossary terms mended
            detok = self.tokenizer.detokenizer() if self.stream and not held else None
            units.append(Unit(ids, own if own != self.params else None, text, casing, detok=detok))
        return units

    async def submit(self) -> None:
        """Queue every unit on the engine at once, or none (503 overloaded with Retry-After; 503 not_ready)."""
        engine, wire = self.entry.engine, []
        for i, item in enumerate(self.items):
            for u, unit in enumerate(item.units):
                unit.id = engine.new_id()
                self.where[unit.id] = (i, u)
                wire.append(WireUnit(unit.id, unit.ids, unit.params))
        if not wire:
            return
        try:
            await engine.submit(self.params, wire, self.stream, self.arrival, self)
        except Overloaded as exc:
            raise ApiError(503, "overloaded", f"server overloaded: {exc}; retry later", {"Retry-After": "1"}) from None
        except EngineGone as exc:
            raise ApiError(503, "not_ready", f"not ready: {exc}", {"Retry-After": "5"}) from None

    def on_token(self, unit: int, token: int) -> None:
        """A new token of a unit (from the engine client)."""
        self.queue.put_nowait((*self.where[unit], token))

    def on_result(self, result: Result) -> None:
        """A unit's result (from the engine client)."""
        self.queue.put_nowait((*self.where[result.id], result))

    def abort(self) -> None:
        """Stop every unit still queued or running (client gone, or a sibling failed)."""
        ids = [unit.id for item in self.items for unit in item.units if unit.id and unit.result is None]
        self.entry.engine.abort(ids)

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

    async def wait_all(
        self,
        check: Callable[[], Awaitable[None]] | None = None,
        progress: Callable[[], None] | None = None,
        every: float = 0.25,
    ) -> None:
        """Apply engine events until every unit has its result: `progress()` after each, `check()` at least every
        `every` seconds even while events flow (it raises to stop, e.g. when the client has gone). Whatever raises
        (a failed unit, `check`, cancellation) aborts the units still running."""
        due = time.monotonic() + every
        try:
            while not self.finished:
                try:
                    self.apply(*await self.next_event(every))
                    if progress is not None:
                        progress()
                except TimeoutError:
                    pass
                if check is not None and time.monotonic() >= due:
                    await check()
                    due = time.monotonic() + every
        except BaseException:
            self.abort()
            raise

    def start(self) -> list[tuple[int, str]]:
        """Literal text before each item's first unit (all of it when the item has none), as (index, text)."""
        return [(i, delta) for i, item in enumerate(self.items) if (delta := self._advance(item))]

    def apply(self, i: int, u: int, event: Event) -> str:
        """Record an engine event; return the text it adds to item i's stream (in layout order)."""
        item, unit = self.items[i], self.items[i].units[u]
        if isinstance(event, int):
            if unit.detok is not None:
                unit.buffered.append(unit.casing.stream(unit.detok.push(event)))
            return self._advance(item)
        if event.error:
            status = 503 if event.error_type == "not_ready" else 500
            raise ApiError(status, event.error_type, f"q[{i}]: {event.error}")
        unit.result = event
        if unit.detok is None:  # not streamed token by token: a stream gets its text whole, as the answer has it
            if self.stream:
                unit.buffered.append(self.unit_text(item, u))
                return self._advance(item)
            return ""
        unit.detok.ids = list(event.hypotheses[0].tokens)  # the whole output, whatever was streamed of it
        unit.buffered.append(unit.casing.stream(unit.detok.flush(), last=True))
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
            out.extend(item.layout.render(t, piece) for t in unit.buffered)
            unit.buffered.clear()
            if unit.result is None:
                break
            item.cursor += 1
        delta = "".join(out)
        item.streamed += delta
        return delta

    def texts(self, item: Item, rank: int = 0) -> str:
        """The item's translation using each unit's hypothesis `rank` (best when it has fewer)."""
        return item.layout.join([self.unit_text(item, u, rank) for u in range(len(item.units))])

    def unit_text(self, item: Item, u: int, rank: int = 0) -> str:
        """Unit u's translation by its hypothesis `rank`: text, or markup when its tags go back by alignment."""
        hyps = item.units[u].result.hypotheses
        hyp = hyps[min(rank, len(hyps) - 1)]
        tagged = item.layout.tagged.get(u)
        if tagged is None:
            unit, text = item.units[u], self.tokenizer.decode(hyp.tokens)
            streamed = unit.detok is not None  # its words are out
            text = self.agreed(unit.text, text) if self.agreed is not None and not streamed else text
            return unit.casing.restore(text)
        if (u, rank) not in item.placed:
            src = source_words(self.tokenizer, tagged.text, len(self.prefix))
            out = target_words(self.tokenizer, hyp.tokens)
            item.placed[u, rank] = place(tagged, src, out, hyp.alignment, item.layout.escape)
        return item.placed[u, rank].text
