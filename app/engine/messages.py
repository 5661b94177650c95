"""What HTTP fronts and an engine core say to each other (msgpack through msgspec): token ids, never text.

A front sends Hello once, then Submit and Abort; the core answers Hello with Ready once it serves, and sends each
front at most one Update per scheduling round: the jobs it accepted or refused, the new tokens of every streaming
request (one per greedy or sampled request; a beam search's newly stable ones, none or several), and the results of
the requests that finished. Non-streaming requests get their result only.
"""

from __future__ import annotations

import dataclasses

import msgspec

from model.runner.params import DecodeParams, Word


class WireUnit(msgspec.Struct, array_like=True):
    """A unit on the wire: one text the model translates by itself, as the front's id for it, its source ids and,
    when they differ from the job's, its own decoding parameters (a glossary's constraints)."""

    id: int
    src: list[int]
    params: DecodeParams | None = None


class Submit(msgspec.Struct, tag=True, array_like=True):
    """A job's units, queued together or refused together (a full queue). The glossary agreement's table of the
    target language's words (the same for every unit of a route: 1,616 words for Spanish) travels once, in `words`
    and `openers`, not in each unit's parameters (`of`, `unit_params`): 64 units of a glossary POST were 6 MB and
    0.55 s of the core's time to decode."""

    job: int
    params: DecodeParams
    units: list[WireUnit]
    stream: bool  # send every new token (else only the result)
    arrival: float  # time.monotonic() when the HTTP request arrived (one clock for every process of a machine)
    words: tuple[Word, ...] = ()
    openers: tuple[tuple[int, ...], ...] = ()

    @classmethod
    def of(cls, job: int, params: DecodeParams, units: list[WireUnit], stream: bool, arrival: float) -> Submit:
        """The job's message, the first unit's agreement table taken out of every unit that shares it."""
        table = next((u.params.agreement for u in units if u.params and u.params.agreement), None)
        if table is None:
            return cls(job, params, units, stream, arrival)
        shared = lambda p: p is not None and p.agreement is not None and p.agreement.words is table.words  # noqa: E731
        lean = [WireUnit(u.id, u.src, _tabled(u.params, (), ())) if shared(u.params) else u for u in units]
        return cls(job, params, lean, stream, arrival, table.words, table.openers)

    def unit_params(self, unit: WireUnit) -> DecodeParams:
        """A unit's decoding parameters, its agreement table put back."""
        p = unit.params or self.params
        if p.agreement is None or p.agreement.words or not self.words:
            return p
        return _tabled(p, self.words, self.openers)


def _tabled(params: DecodeParams, words: tuple[Word, ...], openers: tuple[tuple[int, ...], ...]) -> DecodeParams:
    """`params` with this agreement table."""
    return dataclasses.replace(params, agreement=dataclasses.replace(params.agreement, words=words, openers=openers))


class Abort(msgspec.Struct, tag=True, array_like=True):
    """Stop these units (client gone, or a sibling failed); their rows leave before the next step."""

    ids: list[int]


class Hello(msgspec.Struct, tag=True, array_like=True):
    """A front introduces itself; the core answers Ready once the model is loaded and warm."""


ToCore = Submit | Abort | Hello


class Hyp(msgspec.Struct, array_like=True):
    """One finished output: generated ids (EOS excluded), score (None unless asked for) and why it stopped."""

    tokens: list[int]
    score: float | None
    finish_reason: str  # eos | length
    alignment: list[int] = []  # each token's source position, when the unit's parameters asked (`align`)
    confidence: float | None = None  # the best output's, in [0, 1], when the unit's parameters asked (`confidence`)


class Result(msgspec.Struct, array_like=True):
    """A unit's final answer: hypotheses best first, or an error."""

    id: int
    hypotheses: list[Hyp]
    queue_s: float
    total_s: float
    error: str = ""  # set when the model failed on this unit
    error_type: str = ""  # generation | not_ready

    @property
    def finish_reason(self) -> str:
        """The best hypothesis' reason, or "error"."""
        return self.hypotheses[0].finish_reason if self.hypotheses else "error"


class Ready(msgspec.Struct, tag=True, array_like=True):
    """The core serves: the model's card (a pickled ModelCard: names, tokenizer, architecture, size)."""

    card: bytes


class Update(msgspec.Struct, tag=True, array_like=True):
    """Everything one scheduling round produced for one front."""

    accepted: list[int] = msgspec.field(default_factory=list)  # jobs
    refused: list[tuple[int, str]] = msgspec.field(default_factory=list)  # (job, reason)
    ids: list[int] = msgspec.field(default_factory=list)  # streaming units, once per token they got this step
    tokens: list[int] = msgspec.field(default_factory=list)  # their tokens, in the same order
    results: list[Result] = msgspec.field(default_factory=list)
    waiting: int = 0
    running: int = 0

    def __bool__(self) -> bool:
        return bool(self.accepted or self.refused or self.ids or self.results)


ToFront = Ready | Update
to_core = msgspec.msgpack.Decoder(ToCore)
to_front = msgspec.msgpack.Decoder(ToFront)
encode = msgspec.msgpack.Encoder().encode
