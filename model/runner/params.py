"""Per-request decoding parameters."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

AGREE = 4  # the beam a constrained request decodes with at least (up to the server's max_beam_size)
MOST_BEAM = 8  # the widest beam a glossary's terms raise a request to (the server passes its max_beam_size)
Span = tuple[int, int, int]  # a constraint's source tokens: where its window opens, its term's start and end
ANYWHERE: Span = (-1, -1, -1)  # a constraint's span when it is placed by the prefix
PARKED: Span = (1 << 30, 1 << 30, (1 << 30) + 1)  # a term left to the model, to stand in for its word: met already


@dataclass(frozen=True)
class Probe:
    """How one term's form is asked of the model: source ids (neutral texts, and the term's source after an article),
    the term after each form's article (target ids, no EOS), a prior per form in nats (the language's endings), the
    term as written where its constraint is capitalised to open the output (else empty), the term capitalised where
    it is not but its sentence starts with a capital (the output's first word, should the term open it), and the nats
    an article before it gains where it opens a sentence (a plural subject: "Los ajustes pueden ...")."""

    sources: tuple[tuple[int, ...], ...]
    forms: tuple[tuple[int, ...], ...]
    prior: tuple[float, ...]
    lower: tuple[int, ...] = ()
    upper: tuple[int, ...] = ()
    article: float = 0.0


@dataclass(frozen=True)
class Word:
    """A word that agrees with the noun after it: its ids, the forms it fits, and its own ids in each form (empty
    where it has none)."""

    ids: tuple[int, ...]
    fits: tuple[int, ...]
    variants: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Agreement:
    """A request's agreement: one probe per constraint (None: not probed), the target language's words, and its
    articles in each form, capitalised (an output's first word)."""

    probes: tuple[Probe | None, ...]
    words: tuple[Word, ...]
    openers: tuple[tuple[int, ...], ...] = ()

    def before(self, tokens: list[int], at: int) -> Word | None:
        """The longest word of the table that ends right before `tokens[at]`."""
        found = [w for w in self.words if len(w.ids) <= at and tuple(tokens[at - len(w.ids) : at]) == w.ids]
        return max(found, key=lambda w: len(w.ids), default=None)


@dataclass(frozen=True)
class DecodeParams:
    """How one request is decoded; each row of a batch carries its own."""

    beam_size: int = 1
    num_hypotheses: int = 1
    max_new_tokens: int = 256
    min_new_tokens: int = 0
    length_penalty: float = 1.0
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0
    sampling: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None
    return_scores: bool = True  # greedy/sampling: sum log-probabilities (a log-softmax per step); beams always do
    confidence: bool = False  # greedy/sampling: record each token's confidence signals (`choice.signals`)
    early_stopping: bool = False  # beams: stop once beam_size hypotheses finished (transformers' early_stopping=True)
    forced_bos_id: int | None = None  # the first generated token (NLLB/M2M100: the target-language token)
    forced_eos: bool = False  # EOS is the last token at the length limit (transformers' forced_eos_token_id)
    bad_words_ids: tuple[tuple[int, ...], ...] = ()  # token sequences never generated (their last token is banned)
    constraints: tuple[tuple[int, ...], ...] = ()  # token sequences the output must contain (a glossary's targets)
    constraint_spans: tuple[Span, ...] = ()  # each one's source span: placed by alignment
    align: bool = False  # return each output token's source position with the result (markup put back by it)
    prefix: tuple[int, ...] = ()  # the output's first tokens, forced (a glossary term's fallback: the output up to it)
    agreement: Agreement | None = None  # how the word before each constraint is made to agree with it
    mended: tuple[tuple[int, int], ...] = ()  # the prefix's spans that are not the model's words: a word mended to
    # agree with a term, a term standing in for the model's word
    stand_in: tuple[int, ...] = ()  # a term that replaces the model's own word after the prefix (`unfinished`)
    stand_for: tuple[int, ...] = ()  # ... that word, where known (else the first of a few starting as the term does)
    source_prefix: int = 0  # the source's tokens before its text (a language token): a term's own source keeps them

    def __post_init__(self) -> None:
        checks = [
            (self.beam_size >= 1, "beam_size must be >= 1"),
            (1 <= self.num_hypotheses <= self.beam_size, "num_hypotheses must be in [1, beam_size]"),
            (self.max_new_tokens >= 1, "max_new_tokens must be >= 1"),
            (0 <= self.min_new_tokens <= self.max_new_tokens, "min_new_tokens must be in [0, max_new_tokens]"),
            (self.repetition_penalty > 0, "repetition_penalty must be > 0"),
            (self.no_repeat_ngram_size >= 0, "no_repeat_ngram_size must be >= 0"),
            (self.temperature > 0, "temperature must be > 0"),
            (self.top_k >= 0, "top_k must be >= 0"),
            (0 < self.top_p <= 1, "top_p must be in (0, 1]"),
            (not (self.sampling and self.beam_size > 1), "sampling works with beam_size 1"),
            (all(self.bad_words_ids), "bad_words_ids must not hold an empty sequence"),
            (all(self.constraints), "constraints must not hold an empty sequence"),
            (
                not self.constraints or self.beam_size >= constrained_beam(self.constraints, 0),
                "constraints need a "
                "beam of at least constrained_beam(constraints, 0) (DecodeParams.constrained raises it)",
            ),
            (len(self.constraint_spans) in (0, len(self.constraints)), "constraint_spans: one per constraint"),
            (
                all(0 <= w <= a < b or w == a == b == -1 for w, a, b in self.constraint_spans),
                "constraint_spans: "
                "each (window, start, end), 0 <= window <= start < end, or (-1, -1, -1): placed anywhere",
            ),
            (len(self.prefix) < self.max_new_tokens, "prefix must be shorter than max_new_tokens"),
            (not (self.sampling and self.constraints), "constraints work with greedy and beam search, not sampling"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def constrained(
        self, constraints: tuple[tuple[int, ...], ...], most: int = MOST_BEAM, spans: tuple[Span, ...] = ()
    ) -> DecodeParams:
        """These parameters with `constraints` to meet (placed by alignment on their source `spans` when given), the
        beam raised to what constrained decoding needs, at most `most` (a greedy request decodes with it too);
        unchanged when there are none."""
        if not constraints:
            return self
        beam = max(self.beam_size, constrained_beam(constraints, most))
        return dataclasses.replace(self, constraints=tuple(constraints), beam_size=beam, constraint_spans=tuple(spans))

    @property
    def revisable(self) -> bool:
        """Its finished output may be decoded again or mended (glossary terms with source spans: a missed term is
        forced, a word made to agree), so a stream gets it whole, with its result: what it streams stays its answer."""
        return bool(self.constraint_spans)

    @property
    def scored(self) -> bool:
        """Needs per-step log-probabilities: beam search always, greedy and sampling when asked for scores."""
        return self.beam_size > 1 or self.return_scores

    def forced_token(self, steps: int, eos_id: int) -> int | None:
        """The token the next step must take after `steps` generated ones: the prefix's, forced BOS first, EOS at the
        limit."""
        if steps < len(self.prefix):
            return self.prefix[steps]
        if steps == 0 and self.forced_bos_id is not None:
            return self.forced_bos_id
        if self.forced_eos and steps == self.max_new_tokens - 1:
            return eos_id
        return None

    @property
    def width(self) -> int:
        """Rows this request occupies in a decode batch."""
        return self.beam_size


def constrained_beam(constraints: tuple[tuple[int, ...], ...], most: int = MOST_BEAM) -> int:
    """The beam these constraints decode with: a place for each count of constraints met (0 to all) at least, and
    for each token of the longest one up to `most`, so that the allocation keeps a hypothesis at every stage of a
    term besides those that follow the model (with fewer, a term is rushed in: "A fichero en Firefox." at beam 2,
    "Abrir el fichero en Firefox." at 4, for a 3-token term), and at least AGREE up to `most`, so that the words
    before a term keep alternatives the term's own score chooses among ("El foto" at beam 3, "La foto" at 4)."""
    return max(2, len(constraints) + 1, min(max(max(map(len, constraints)) + 1, AGREE), most))


@dataclass(frozen=True)
class GenerationDefaults:
    """A checkpoint's own decoding defaults (generation_config.json): a request's parameters override them."""

    beam_size: int = 1
    max_new_tokens: int | None = None
    min_new_tokens: int = 0
    length_penalty: float = 1.0
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0
    early_stopping: bool = False
    forced_eos: bool = False
    bad_words_ids: tuple[tuple[int, ...], ...] = ()
