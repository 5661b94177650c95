"""Glossary terms that stand in for the model's own word. A term the model reads as the start of a longer word of its
own ("bici" for its "bicicleta", "profe" for its "profesor"): after the term's last piece the model would go on with
the word, and what it writes instead is what is left of that word ("La bici cictil vieja", "El profe profesor es").
And the model's own word for a term's source right after the term ("en el andén la plataforma"): the source
translated twice; and a term that is the model's word in another gender ("vecina" for its "vecino"), whose words
after it are better chosen for the model's word ("Nuestra vecina dos perros."). The output is decoded again from the
term's place (its article's) with the term left to the model, and the model's own word, which the decoder reads from
then on, is replaced by the term in the output: "La bici vieja es más pesada", "en el andén en mediodía", "Nuestra
vecina tiene dos perros". The words after it follow the model's word of the same meaning; the article takes the
term's form (an abbreviation keeps its word's gender)."""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from model.runner import Runner
from model.runner.agreement import MARGIN, likelihoods, preferred
from model.runner.align import alignments
from model.runner.constraints import Words
from model.runner.fallback import places, variant
from model.runner.loop import pad_batch
from model.runner.params import ANYWHERE, PARKED, DecodeParams, Probe
from model.runner.search import Hypothesis

ONWARD = 0.25  # the model's probability of going on with the word after a term's last piece: the term reads unfinished
ENDINGS = ("s", "es")  # pieces that end a word as its plural: not a longer word (Spanish, Portuguese, French, English)
NEXT_WORDS = 3  # words after the prefix among which the model's own word for a term that stands in is looked for
AFTER = 3  # words right after a term in which the model's own word for it means it translated its source again
STANDS = -3.0  # the least log-probability of a word in a term's place that makes it the model's own word for the term
ECHO = 3.0  # nats by which the word after a term is likelier after it than after the model's own word: said twice


@dataclass(frozen=True)
class Pieces:
    """The target vocabulary as read here: each token's text (SentencePiece's piece), whether it goes on with a word,
    and (V,) 1.0 where it goes on with it as a longer word (not as its plural: `ENDINGS`)."""

    text: tuple[str, ...]
    joins: list[bool]
    longer: Tensor

    @classmethod
    def of(cls, words: Words) -> Pieces:
        """From the decoder's `Words` (its pieces' text on the host)."""
        plural = torch.tensor([p in ENDINGS for p in words.pieces], device=words.joins.device)
        return cls(words.pieces, words.joins.tolist(), (words.joins & ~plural).float())

    def spelled(self, tokens: list[int] | tuple[int, ...]) -> str:
        """The letters of `tokens`' text, lowercased, without accents."""
        return letters("".join(self.text[t] for t in tokens))

    def lead(self, tokens: list[int] | tuple[int, ...]) -> str:
        """The letters `tokens` start with (the first two)."""
        return self.spelled(tokens)[:2]


@torch.inference_mode()
def onward(
    runner: Runner, src: list[int], tokens: list[int], found: list[tuple[int, int]], vocab: Pieces
) -> list[tuple[float, int]]:  # fmt: skip
    """Teacher-forced over the output `tokens`, for each (start, end) of a term in it: the probability that the token
    after it makes a longer word of it, and the model's own first token where it starts."""
    logits = teacher_forced(runner, src, tokens[: max(e for _, e in found)])  # (T + 1, V)
    at = torch.tensor([p for pair in found for p in pair], device=logits.device)
    starts, ends = logits.index_select(0, at).view(len(found), 2, -1).unbind(1)  # (E, V) each
    longer = ends.softmax(-1) @ vocab.longer[: ends.shape[1]]  # (E,)
    return list(zip(longer.tolist(), starts.argmax(-1).tolist(), strict=True))


def alone(runner: Runner, src: tuple[int, ...], term: tuple[int, ...], vocab: Pieces) -> float:
    """The probability that the model goes on with `term`, alone as the output of `src` (its own source words:
    `own_source`), as a longer word: a term it reads whole (most: "fichero" 0.01, "repisa" 0.13 on the built-in
    model; "profe" 0.72, "moto" 0.95) needs no look in context."""
    return onward(runner, list(src), list(term), [(0, len(term))], vocab)[0][0]


@torch.inference_mode()
def own_word(runner: Runner, src: tuple[int, ...], vocab: Pieces) -> tuple[int, ...]:
    """The model's own first word (its tokens) for `src` (a term's own source words: `own_source`), greedy:
    "Settings" -> "Configuración", "platform" -> "platforma" (AFTER words after a term that start as it does are its
    word again: `again`)."""
    cfg, device = runner.cfg, runner.device
    src_ids, src_mask = pad_batch([list(src)], cfg.pad_id, device)
    memory, out = runner.encode(src_ids, src_mask), []
    while len(out) < 8:
        tgt = torch.tensor([[cfg.decoder_start_id, *out]], device=device)
        token = int(runner.decode(memory, src_mask, tgt)[0, -1].argmax())
        if token == cfg.eos_id or (out and not vocab.joins[token]):
            break
        out.append(token)
    return tuple(out)


def own_source(src: list[int], span: tuple[int, int, int], prefix: int = 0) -> tuple[int, ...]:
    """A term's own source words, as a source of their own (the source's `prefix` tokens, a language token the model
    reads the route by, and its last token, EOS, kept), from its `span`; the whole source for a term placed by a
    prefix (no span)."""
    return tuple(src) if span[1] < 0 else (*src[:prefix], *src[span[1] : span[2]], src[-1])


def redo(
    runner: Runner, src: list[int], params: DecodeParams, tokens: list[int], vocab: Pieces,
    alone: Callable[[tuple[int, ...], tuple[int, ...]], float], word: Callable[[int], tuple[int, ...]],
) -> DecodeParams | None:  # fmt: skip
    """The parameters that decode again from the first term of the output `tokens` that the model reads as the start
    of a longer word of its own (it would go on with it: `ONWARD`; its own first piece there starts as the term does),
    its constraint parked (`PARKED`: met already) and the term to replace the model's word there (`stand_in`); None
    when every term reads whole. A term that stands in already is not looked at again; one that the model reads whole
    alone (`alone` of its own source words and the term, cached by the caller) is not looked at in context. Last, a
    one-word term whose source the words right after it say again: those words cut (`said`)."""
    fixed = len(params.prefix)  # a retry's prefix ends with the last term it placed: nothing before it moves
    found = [(at, at + len(params.constraints[k]), k) for at, k in sorted(occurrences(params, tokens, vocab.joins))]
    found = [(at, end, k) for at, end, k in found if end >= fixed and at < params.max_new_tokens - 1]
    spans, terms = params.constraint_spans, params.constraints
    beside = [(at, k, w) for at, end, k in found if (w := again(tokens, end, word(k), terms[k], vocab))]
    beside += [(at, k, w) for at, _, k in found if variant(vocab.spelled(w := word(k)), vocab.spelled(terms[k]))]
    beside.sort()
    if beside:  # the model's own word for the term right after it, or the term its word in another gender: decoded
        at, k, w = beside[0]  # again from its article, its word replaced
        article = params.agreement.before(tokens, at) if params.agreement is not None else None
        cut = at - len(article.ids) if article is not None and at - len(article.ids) >= fixed else at
        return parked(params, tokens[:cut], k, w)
    whole = lambda k: alone(own_source(src, spans[k], params.source_prefix), terms[k]) < ONWARD  # noqa: E731
    unfinished = [(at, end, k) for at, end, k in found if not whole(k)]
    mended = _unfinished(runner, src, params, tokens, vocab, unfinished)
    return mended or said_again(runner, src, params, tokens, found, word, vocab)


def said_again(
    runner: Runner, src: list[int], params: DecodeParams, tokens: list[int], found: list[tuple[int, int, int]],
    word: Callable[[int], tuple[int, ...]], vocab: Pieces,
) -> DecodeParams | None:  # fmt: skip
    """The parameters that decode again with the output up to the first one-word term of `found` (start, end,
    constraint) placed by alignment whose source the words right after it say again (`said`) forced, those words
    cut and the rest kept ("Mi jefa quiere el informe", "El auto está"), else None."""
    spans = params.constraint_spans
    one_word = lambda at, end: len(word_spans(tokens[:end], at, vocab)) == 1  # noqa: E731
    single = [(at, end, k) for at, end, k in found if spans[k][1] >= 0 and one_word(at, end)]
    if not single:
        return None
    aligned, starts = alignments(runner, [(src, tokens)])[0], {at for at, *_ in found}
    for at, end, k in single:
        cut = said(runner, src, tokens, at, end, aligned, spans[k], starts, word(k), vocab)
        if cut is not None and len(tokens) - (cut - end) < params.max_new_tokens:
            kept = tuple(m for m in params.mended if m[1] <= at)
            placed = tuple(ANYWHERE if i == k else s for i, s in enumerate(spans))
            return dataclasses.replace(params, prefix=(*tokens[:end], *tokens[cut:]), constraint_spans=placed,
                                       mended=kept)  # fmt: skip
    return None


def _unfinished(
    runner: Runner, src: list[int], params: DecodeParams, tokens: list[int], vocab: Pieces,
    found: list[tuple[int, int, int]],
) -> DecodeParams | None:  # fmt: skip
    """The parameters that decode again from the first of the terms `found` (start, end, constraint) that the model
    reads, in context, as the start of a longer word of its own, else None."""
    if not found:
        return None
    for (at, _, k), (p, first) in zip(found, onward(runner, src, tokens, [f[:2] for f in found], vocab), strict=True):
        if p < ONWARD:
            continue
        if vocab.lead([first]) == vocab.lead(params.constraints[k]):
            return parked(params, tokens[:at], k)
        article = params.agreement is not None and any(w.ids == (first,) for w in params.agreement.words)
        lower = opener(params, k)  # a capitalised term that opens the output, after the model's own article
        if article and lower and vocab.lead([next_piece(runner, src, [*tokens[:at], first])]) == vocab.lead(lower):
            return parked(dataclasses.replace(params, constraints=lowered(params, k, lower)), tokens[:at], k)
    return None


def next_piece(runner: Runner, src: list[int], tokens: list[int]) -> int:
    """The model's own next token after the output `tokens`, teacher-forced."""
    return int(teacher_forced(runner, src, tokens)[-1].argmax())


@torch.inference_mode()
def teacher_forced(runner: Runner, src: list[int], tokens: list[int]) -> Tensor:
    """The decoder's logits (T + 1, V) over the output `tokens` of `src`, teacher-forced (float32)."""
    cfg, device = runner.cfg, runner.device
    src_ids, src_mask = pad_batch([src], cfg.pad_id, device)
    tgt = torch.tensor([[cfg.decoder_start_id, *tokens]], device=device)  # (1, T + 1)
    return runner.decode(runner.encode(src_ids, src_mask), src_mask, tgt)[0].float()


def opener(params: DecodeParams, k: int) -> tuple[int, ...]:
    """Constraint k's term as written where it was capitalised to open the output ("tele" for "Tele"), else ()."""
    probe = probe_of(params, k)
    return probe.lower if probe is not None and probe.lower != params.constraints[k] else ()


def probe_of(params: DecodeParams, k: int) -> Probe | None:
    """Constraint k's agreement probe (twins share the first one's), or None."""
    twin = params.constraints.index(params.constraints[k])
    return params.agreement.probes[twin] if params.agreement is not None else None


def lowered(params: DecodeParams, k: int, lower: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """The constraints with constraint k's term (and its twins) as written: words come before it now."""
    return tuple(lower if c == params.constraints[k] else c for c in params.constraints)


def again(tokens: list[int], end: int, word: tuple[int, ...], term: tuple[int, ...], vocab: Pieces) -> tuple[int, ...]:
    """The model's own `word` for a term where one of the AFTER words after the term ending at `end` starts as it
    does (its first four letters; a word that starts as the term does is no other word), else ()."""
    lead = vocab.spelled(word)[:4]
    if len(lead) < 3 or lead.startswith(vocab.lead(term)):
        return ()
    after = word_spans(tokens, end, vocab)[:AFTER]
    return word if any(vocab.spelled(tokens[a:b]).startswith(lead) for a, b in after) else ()


def said(
    runner: Runner, src: list[int], tokens: list[int], at: int, end: int, aligned: list[int],
    span: tuple[int, int, int], terms: set[int], own: tuple[int, ...], vocab: Pieces,
) -> int | None:  # fmt: skip
    """Where the words right after the term at [at, end) of `tokens` that say its source again end, or None: the longest
    run of the AFTER words after it that align to the term's own source words (`aligned`: each token's source position),
    one of them a word of its own (four letters: not "de" alone) that the model would write in the term's place
    (`stands`), "Mi jefa de jefe quiere" for "My boss wants", or the run aligned only where the term is not
    (`elsewhere`), "Espera en el semáforo ligero" for "Wait at the traffic light"; or the one word after it, aligned to
    the source's end (where attention rests), that the model finds ECHO nats likelier after the term than after its
    own word `own` for it, "El auto carro está" for "The car is". A term's own occurrence (starting at one of `terms`)
    ends the run."""
    words, run = word_spans(tokens, end, vocab)[:AFTER], []
    for a, b in words:
        if a in terms or (run and a != run[-1][1]) or (not run and a != end):
            break
        if not all(span[1] <= p < span[2] for p in aligned[a:b]):
            break
        run.append((a, b))
    own_words = [tuple(tokens[a:b]) for a, b in run if len(vocab.spelled(tokens[a:b])) >= 4]
    if own_words and elsewhere(aligned, at, end, run, span[2]):
        return run[-1][1]
    if own_words and stands(runner, src, tokens[:at], max(own_words, key=len)):
        return run[-1][1]
    if words and words[0][0] == end and all(p == len(src) - 1 for p in aligned[words[0][0] : words[0][1]]):
        if echoes(runner, src, tokens, at, end, own, vocab):
            return words[0][1]
    return None


def elsewhere(aligned: list[int], at: int, end: int, run: list[tuple[int, int]], after: int) -> bool:
    """Whether the run of words after the term at [at, end), inside the term's source, aligns only to source tokens the
    term's own tokens do not align to: a source of two words or more said word by word once the term has said it whole
    ("semáforo ligero" for "traffic light", "ligero" at "light"; "El partido del soccer" for "The soccer game"). Not
    while the source token right after the term's source (`after`) has no output token of its own: the run may be
    its translation read a token early ("el estacionamiento detrás del hotel", "detrás" at "lot" of "parking lot
    behind")."""
    return after in aligned and not set(aligned[at:end]) & {p for a, b in run for p in aligned[a:b]}


def stands(runner: Runner, src: list[int], before: list[int], word: tuple[int, ...]) -> bool:
    """Whether the model would write `word` right after `before`, in the place of the term there: its own word for the
    term's source ("jefe" after "Mi" for "My boss"; not "detrás" after "en el", which only glanced at "parking lot"),
    at a log-probability of STANDS or more."""
    with_word, without = likelihoods(runner, [(tuple(src), (*before, *word)), (tuple(src), tuple(before))])
    return with_word - without >= STANDS


def echoes(
    runner: Runner, src: list[int], tokens: list[int], at: int, end: int, own: tuple[int, ...], vocab: Pieces
) -> bool:  # fmt: skip
    """Whether the word right after the term at [at, end) of `tokens` follows the term rather than the sentence: the
    model finds it ECHO nats likelier after the term than after its own word `own` for it ("carro" after "El auto",
    not after "El coche"); a word that starts as the term does, or no word of its own, says nothing."""
    words = word_spans(tokens, end, vocab)
    if len(vocab.spelled(own)) < 4 or vocab.lead(own) == vocab.lead(tokens[at:end]) or not words or words[0][0] != end:
        return False
    before, after = tuple(tokens[:at]), tuple(tokens[end : words[0][1]])
    term = tuple(tokens[at:end])
    outs = [(*before, *term), (*before, *term, *after), (*before, *own), (*before, *own, *after)]
    with_term, term_next, with_own, own_next = likelihoods(runner, [(tuple(src), o) for o in outs])
    return (term_next - with_term) - (own_next - with_own) >= ECHO


def parked(params: DecodeParams, prefix: list[int], k: int, word: tuple[int, ...] = ()) -> DecodeParams:
    """`params` decoding after `prefix` with constraint k parked, its term to stand in for the model's `word` (else
    the first one that starts as the term does)."""
    spans = tuple(PARKED if i == k else s for i, s in enumerate(params.constraint_spans))
    return dataclasses.replace(params, prefix=tuple(prefix), constraint_spans=spans, stand_in=params.constraints[k],
                               stand_for=word)  # fmt: skip


def occurrences(params: DecodeParams, tokens: list[int], joins: list[bool]) -> list[tuple[int, int]]:
    """Where each term that does not stand in for a word of the model's starts in `tokens`, as whole words, with its
    constraint: the i-th occurrence of a term is its i-th twin's (a term wanted once per source occurrence)."""
    found = []
    for j, term in enumerate(params.constraints):
        twins = [k for k, c in enumerate(params.constraints) if c == term]
        if twins[0] == j:
            found += zip(places(tokens, term, joins), twins, strict=False)
    stood = {a for a, _ in params.mended}
    return [(at, k) for at, k in found if at not in stood]


def stand(
    hyps: list[Hypothesis], params: DecodeParams, vocab: Pieces, likely: Callable[[list[tuple[int, ...]]], list[float]],
    forms: Callable[[Probe], list[float]],
) -> tuple[list[Hypothesis], DecodeParams]:  # fmt: skip
    """A stand-in retry's outputs with its term in place of the model's word (`replaced`) and the word before it in
    the term's form: for an abbreviation the form the model gives its own word (`article`), for another word the
    agreement's (`agreed`); and its parameters from then on: the best output fixed up to the term (a later retry cuts
    no earlier), the term's constraint placed by it, its span and a swapped word's not the model's words (`mended`:
    not looked at again). `likely`: outputs' log-probabilities for the source; `forms`: a probe's form scores."""
    placed, k = [replaced(h, params, vocab) for h in hyps], params.constraint_spans.index(PARKED)
    (best, at, own), term, mended = placed[0], params.stand_in, params.mended
    if params.stand_for:  # each output's own word before it, the term's form from the agreement
        swaps = [agreed(params, h.tokens, a, k, forms) for h, a, _ in placed]
    else:  # in every output: the word is in the prefix they share
        swaps = [article(params, best.tokens, at, own, likely)] * len(placed)
    for i, ((h, a, w), swap) in enumerate(zip(placed, swaps, strict=True)):
        if swap is not None:
            start, old, new = swap
            placed[i] = (swapped(h, start, old, new), a + len(new) - len(old), w)
            mended = (*mended, (start, start + len(new))) if i == 0 else mended
    (best, at, _) = placed[0]
    spans = tuple(ANYWHERE if i == k else s for i, s in enumerate(params.constraint_spans))
    prefix, mended = tuple(best.tokens[: at + len(term)]), (*mended, (at, at + len(term)))
    fixed = dataclasses.replace(params, prefix=prefix, constraint_spans=spans, mended=mended, stand_in=(), stand_for=())
    return [h for h, _, _ in placed], fixed


def agreed(
    params: DecodeParams, tokens: list[int], at: int, k: int, forms: Callable[[Probe], list[float]]
) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:  # fmt: skip
    """The word of the language's table right before constraint k's term at `at` (start, its ids, the form to swap
    it for), where the agreement's probe of the term prefers another form by MARGIN (the model wrote it for its own
    word: "la plataforma", for "andén"); None where it fits or there is no probe."""
    probe = probe_of(params, k)
    word = params.agreement.before(tokens, at) if probe is not None else None
    variant = preferred(word, forms(probe)) if word is not None else None
    return None if variant is None else (at - len(word.ids), word.ids, variant)


def article(
    params: DecodeParams, tokens: list[int], at: int, own: tuple[int, ...],
    likely: Callable[[list[tuple[int, ...]]], list[float]],
) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:  # fmt: skip
    """The word of the language's table right before a term that stands in at `at`, in the prefix (start, its ids,
    the form to swap it for), where the model, before its own word `own`, likes another form better by MARGIN: an
    abbreviation keeps its word's gender, which its ending may hide ("el info" for "la información", "el disco" for
    "la discoteca"); None where it fits."""
    word = params.agreement.before(tokens, at) if params.agreement is not None and own else None
    forms = [v for f, v in enumerate(word.variants) if v and f not in word.fits] if word is not None else []
    if not forms or at > len(params.prefix):
        return None  # the word is the model's, written for its own word (the output's from the prefix on)
    start = at - len(word.ids)
    scores = likely([(*tokens[:start], *v, *own) for v in (word.ids, *forms)])
    best = max(range(len(scores)), key=scores.__getitem__)
    return (start, word.ids, forms[best - 1]) if best and scores[best] - scores[0] >= MARGIN else None


def swapped(hyp: Hypothesis, start: int, old: tuple[int, ...], new: tuple[int, ...]) -> Hypothesis:
    """`hyp` with the word `old` at `start` swapped for `new` (its pieces take the word's log-probability in equal
    parts; 0 where `old` is empty)."""
    tokens = [*hyp.tokens[:start], *new, *hyp.tokens[start + len(old) :]]
    logprobs = hyp.logprobs
    if logprobs is not None:
        word = sum(logprobs[start : start + len(old)]) / len(new)
        logprobs = [*logprobs[:start], *[word] * len(new), *logprobs[start + len(old) :]]
    return dataclasses.replace(hyp, tokens=tokens, logprobs=logprobs)


def replaced(hyp: Hypothesis, params: DecodeParams, vocab: Pieces) -> tuple[Hypothesis, int, tuple[int, ...]]:
    """A finished output with `params.stand_in` in place of the model's own word after the prefix, where the term
    starts and the model's word: the first that starts as `params.stand_for` does, else of the next NEXT_WORDS words
    the first that starts as the term does (the model took the term for the start of its word), else the first that
    is no word of the agreement's table (the model wrote another word of its own: "El médico es", not "El doctor es",
    whose "El" is no word to replace); the term's pieces take the word's log-probability in equal parts."""
    tokens, term = hyp.tokens, params.stand_in
    words = word_spans(tokens, len(params.prefix), vocab)
    own = []
    if params.stand_for:  # the model's word, as `again` found it, wherever the model put it ("El menú de ...")
        lead = vocab.spelled(params.stand_for)[:4]
        own = [w for w in words if vocab.spelled(tokens[w[0] : w[1]]).startswith(lead)]
    own = own or [w for w in words[:NEXT_WORDS] if vocab.lead(tokens[w[0] : w[1]]) == vocab.lead(term)]
    table = {w.ids for w in params.agreement.words} if params.agreement is not None else set()
    own = own or [w for w in words if tuple(tokens[w[0] : w[1]]) not in table]
    start, end = (own or words or [(len(params.prefix),) * 2])[0]  # no word there: the term goes in before the rest
    return swapped(hyp, start, tuple(tokens[start:end]), term), start, tuple(tokens[start:end])


def word_spans(tokens: list[int], start: int, vocab: Pieces) -> list[tuple[int, int]]:
    """The words of `tokens` from `start` on, as [start, end) token spans: a word-initial piece and the pieces that go
    on with it (a bare "▁" starts one too: "▁", "t", "ío"), if they hold a letter (punctuation and special tokens are
    no words)."""
    out = []
    for i in range(start, len(tokens)):
        if vocab.text[tokens[i]].startswith("\u2581"):
            out.append((i, i + 1))
        elif vocab.joins[tokens[i]] and out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
    return [(a, b) for a, b in out if vocab.spelled(tokens[a:b])]


def letters(text: str) -> str:
    """`text`'s letters, lowercased, without accents ("Configuración" -> "configuracion")."""
    return "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if c.isalnum())
