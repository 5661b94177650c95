"""Lexically constrained beam search: every hypothesis's progress through its request's constraints (token sequences
the output must contain, a glossary's targets), as columns of the decode state, and the candidates and their order
for dynamic beam allocation (Post & Vilar 2018; vectorized as Hu et al. 2019 and fairseq's `--constraints`).

Per row: the constraints (N, J, L) (padded with -1; a row of a request without constraints has none), each one's
length (N, J), the tokens of it matched by the row's latest tokens (N, J) and whether it was met (N, J). A beam step
adds to each group's best candidates every row's next token of each constraint it has not met and its own best token,
and ranks the candidates by bank (constraint tokens met, partial matches included, less the tokens of constraints
lost) round-robin: the best of every bank, from the fullest, then the second best of every bank, and so on. EOS waits
until every constraint that can still be met is met.

Placed by alignment (Hasler et al. 2018; Chen et al. 2021): a constraint with a source span (the source tokens of the
glossary term it translates, and of the word before it) opens its window when the decoder's alignment (its
cross-attention while it predicts the next token, `ModelConfig.alignment`) reaches that span; the term may start only
within the WINDOW_WORDS words from there, where the decoder looks at the term's own source words between words (not
at the word before them: "antes de instalar actualizaciones"), and a hypothesis that lets them pass without it, or
writes another word while it looks at the term's own source words (its own word for the term), has lost it (it may
end, ranked below every hypothesis that met all); so has one that would end the sentence first, and one that
translates a met term's source again (a word of its own while it looks hard at those words, past the words right
after the term). Whole words: a term starts where a word starts (its first token is a word-initial piece) and the
token after its last one does not continue that word."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

import torch
import torch.nn.functional as F
from torch import Tensor

from model.runner.beams import DEAD, Moves
from model.runner.choice import row_max
from model.runner.params import PARKED
from model.runner.rows import Beams
from model.runner.transfer import upload

NEG_INF = float("-inf")
WINDOW_WORDS = 2  # words, from the one the alignment reaches a term's source at, in which the term may start
AGAIN_MASS = 0.5  # the alignment's mass on a met term's own source words that reads as translating them again
AFTER_WORDS = 2  # words right after a term in which the decoder may still look at its source (it moves on)
ALIGN_MASS = 0.3  # the alignment's mass on a term's source span that opens its window (or its argmax inside it)


@dataclass
class Words:
    """Per target token (V,): whether it starts a word (SentencePiece's word-initial piece) and whether it continues
    the word before it (no word start, a letter or digit, or a hyphen that makes a compound of it, "auto-": not other
    punctuation, not a special token)."""

    starts: Tensor  # (V,) bool
    joins: Tensor  # (V,) bool
    pieces: tuple[str, ...] = dataclasses.field(default=(), metadata={"host": True})  # each one's text, on the host

    @classmethod
    def of(cls, pieces: list[str], device: torch.device) -> Words:
        """From every target id's piece ("" for special tokens), on `device`."""
        starts = [p.startswith("\u2581") for p in pieces]
        goes_on = [any(c.isalnum() for c in p) or p.startswith("-") for p in pieces]
        joins = [not s and g for s, g in zip(starts, goes_on, strict=True)]
        return cls(upload(starts, torch.bool, device), upload(joins, torch.bool, device), tuple(pieces))


@dataclass
class Constraints:
    """The constraint columns of a batch's rows (see the module's docstring)."""

    tokens: Tensor  # (N, J, L) long, -1 past each constraint's end
    length: Tensor  # (N, J) long, 0 for no constraint
    matched: Tensor  # (N, J) long
    met: Tensor  # (N, J) bool
    span: Tensor  # (N, J, 3) long: its window's source start, its term's start and end; -1: placed anywhere
    budget: Tensor  # (N, J) long: words its window has left (-1: not open yet; 0: passed); once met, AFTER_WORDS left
    fresh: Tensor  # (N,) bool: the row's latest token ended a constraint (the next one may not continue its word)
    looking: Tensor  # (N, J) bool: the decoder looks at the term's own source words at this step (between words;
    # hard, once met)
    twins: Tensor  # (N, J, J) bool: constraint k < j has the tokens of j (they are met one at a time)

    @classmethod
    def start(
        cls, per_row: list[tuple[tuple[int, ...], ...]], device: torch.device,
        spans: list[tuple[tuple[int, int, int], ...]] | None = None,
    ) -> Constraints:  # fmt: skip
        """Rows that have generated nothing yet, each with its request's constraints and, where given, their source
        spans (one upload each)."""
        n, j = len(per_row), max((len(c) for c in per_row), default=0)
        width = max((len(t) for c in per_row for t in c), default=0)
        grid = [[list(t) + [-1] * (width - len(t)) for t in c] + [[-1] * width] * (j - len(c)) for c in per_row]
        tokens = upload(grid, torch.long, device).view(n, j, width)
        spans = spans or [()] * n
        places = [[list(s) for s in sp] + [[-1, -1, -1]] * (j - len(sp)) for sp in spans]
        length = (tokens >= 0).sum(2)
        span = upload(places, torch.long, device).view(n, j, 3)
        fresh, budget = torch.zeros(n, dtype=torch.bool, device=device), torch.full_like(length, -1)
        twins = (tokens[:, :, None, :] == tokens[:, None, :, :]).all(-1)  # (N, J, J) the same tokens
        twins &= torch.ones(j, j, dtype=torch.bool, device=device).tril(-1)  # ... and an earlier constraint
        met = (length == 0) | (span[..., 0] == PARKED[0])  # a term that stands in for the model's word: met already
        return cls(tokens, length, torch.zeros_like(length), met, span, budget, fresh, length < 0, twins)

    def concat(self, other: Constraints) -> Constraints:
        """These rows followed by `other`'s."""
        j, width = max(self.length.shape[1], other.length.shape[1]), max(self.tokens.shape[2], other.tokens.shape[2])
        a, b = self.fit(j, width), other.fit(j, width)
        return Constraints(*(torch.cat([x, y]) for x, y in zip(a.fields(), b.fields(), strict=True)))

    def fit(self, j: int, width: int) -> Constraints:
        """Padded to `j` constraints of `width` tokens (itself when it has as many)."""
        dj, dw = j - self.length.shape[1], width - self.tokens.shape[2]
        if not dj and not dw:
            return self
        tokens = F.pad(self.tokens, (0, dw, 0, dj), value=-1)
        return Constraints(tokens, F.pad(self.length, (0, dj)), F.pad(self.matched, (0, dj)),
                           F.pad(self.met, (0, dj), value=True), F.pad(self.span, (0, 0, 0, dj), value=-1),
                           F.pad(self.budget, (0, dj), value=-1), self.fresh, F.pad(self.looking, (0, dj)),
                           F.pad(self.twins, (0, dj, 0, dj)))  # fmt: skip

    def fields(self) -> tuple[Tensor, ...]:
        """Every tensor, in field order."""
        return (self.tokens, self.length, self.matched, self.met, self.span, self.budget, self.fresh, self.looking,
                self.twins)  # fmt: skip

    @cached_property
    def placed(self) -> Tensor:
        """(N, J) bool: constraints placed by alignment (they have a source span)."""
        return self.span[..., 0] >= 0

    @cached_property
    def following(self) -> Tensor:
        """(N, J) long: each constraint's token after those matched (its first when none is)."""
        return self.tokens.gather(2, self.matched.clamp(max=self.tokens.shape[2] - 1)[:, :, None])[:, :, 0]

    def _with(self, budget: Tensor, looking: Tensor, pending: Tensor | None = None) -> Constraints:
        """These columns with a new budget and looking (`placed`, once computed, kept: the spans are the same; `lost`
        from `pending` (N, J), placed constraints neither under way nor met, where given)."""
        new = Constraints(self.tokens, self.length, self.matched, self.met, self.span, budget, self.fresh, looking,
                          self.twins)  # fmt: skip
        if "placed" in self.__dict__:
            new.__dict__["placed"] = self.placed
        if pending is not None:
            new.__dict__["lost"] = pending & (budget == 0)
        return new

    def opened(self, align: Tensor, mid_word: Tensor | None = None, ends: Tensor | None = None) -> Constraints:
        """These rows once the decoder's alignment `align` (N, S) of this step is known: a window not open yet opens
        where its mass on the constraint's span reaches ALIGN_MASS or its argmax falls inside; every window of a term
        not under way has passed once the argmax reaches the source's last token between words (a term is never
        appended after the sentence; `mid_word` (N,) bool: rows whose model goes on with its word, where a glance at
        the source's EOS, a common resting place of attention, is not the sentence's end: "Reinic|ia|r"), and where
        the model's own next token `ends` (N,) bool (given) is EOS (the term would only come after the sentence)."""
        s = align.shape[1]
        span = self.span.clamp(min=0)  # (N, J, 3)
        start, own, end = span.unbind(-1)  # (N, J) each
        mass = F.pad(align.float().cumsum(1), (1, 0))  # (N, S + 1)
        to_start, to_own, to_end = mass.gather(1, span.flatten(1).clamp_(max=s)).view_as(span).unbind(-1)  # (N, J)
        peak = align.argmax(1, keepdim=True)  # (N, 1)
        before_end = peak < end
        reached = (to_end - to_start >= ALIGN_MASS) | ((start <= peak) & before_end)
        at = torch.arange(s, device=align.device)
        last = ((align > 0) * at).amax(1, keepdim=True)  # (N, 1) the last source token (padding weighs 0)
        opening = (self.budget < 0) & reached  # (an unplaced span, -1 throughout, reaches nothing)
        between = None if mid_word is None else ~mid_word[:, None]  # (N, 1)
        at_end = peak == last if between is None else (peak == last) & between  # (N, 1)
        not_met = ~self.met
        passed = at_end & ~opening  # the end: passed
        if ends is not None:
            passed |= ends[:, None]
        pending = self.placed & (self.matched == 0) & not_met  # (N, J) placed terms neither under way nor met
        passed &= pending
        budget = torch.where(opening, WINDOW_WORDS, self.budget).masked_fill_(passed, 0)
        looking = (own <= peak) & before_end
        looking &= not_met | (to_end - to_own >= AGAIN_MASS)  # a term met: looked at hard
        if between is not None:  # a term not met starts between words only ("una pe pestaña" otherwise)
            looking &= self.met | between
        return self._with(budget, looking, pending)

    def replayed(self, tokens: Tensor, align: Tensor | None, words: Words | None, eos_id: int) -> Constraints:
        """These rows after each took its forced tokens (N, P) (-1 past its prefix), one a step, as decode steps leave
        them: where the decoder looked at each step, align (N, P, S) (None: no term placed by alignment), opens
        windows first."""
        rows, cons = torch.arange(tokens.shape[0], device=tokens.device), self
        for t in range(tokens.shape[1]):
            took, taking = tokens[:, t].clamp(min=0), tokens[:, t] >= 0  # (N,) each
            after = cons
            if align is not None:
                mid_word = words.joins[took] if words is not None else None
                after = after.opened(align[:, t], mid_word, took == eos_id)
            fields = zip(after.extend(rows, took, words).fields(), cons.fields(), strict=True)
            cons = Constraints(*(torch.where(taking.view(-1, *[1] * (x.dim() - 1)), x, y) for x, y in fields))
        return cons

    def select(self, rows: Tensor) -> Constraints:
        """Rows `rows` (old indices, in their new order)."""
        return Constraints(*(x.index_select(0, rows) for x in self.fields()))

    def after(
        self, rows: Tensor, tokens: Tensor, words: Words | None = None, best: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:  # fmt: skip
        """The progress of rows `rows` (any shape S) after taking `tokens` (S): matched and met, each (*S, J). A token
        goes on with the constraints under way whose next token it is, else starts the first one it starts whose
        window is open (an unplaced one: any time; of two constraints of the same tokens, the first one: they are met
        one at a time). A placed term starts only inside its window where the decoder looks at its own source words,
        between words: not while it still translates the word before ("antes de actualizaciones" for "before
        installing updates"); elsewhere its first token is the model's own word ("Exportar"), unless the model's own
        next token (`best` (N,), every row's argmax) is the term's first: the term is its own word there, wherever the
        decoder looks inside the window ("una carpeta nueva", the noun before its adjective). After a placed term and
        the AFTER_WORDS words that follow it, a word (`words` given) chosen while the decoder looks at its source
        again translates it twice ("El fichero no se pudo guardar el archivo"): the term is lost."""
        length, matched, met = self.length[rows], self.matched[rows], self.met[rows]  # (*S, J) each
        first = self.tokens[:, :, 0]  # (N, J)
        looking = self.looking
        if best is not None:  # the model would write the term's first token itself
            looking = looking | (best[:, None] == first)
        open_now = torch.where(self.placed, (self.budget > 0) & looking, self.budget != 0)  # (N, J) where it may start
        t = tokens[..., None]
        goes_on = (matched > 0) & (t == self.following[rows])
        starts = (t == first[rows]) & (~self.met & open_now)[rows] & ~goes_on.any(-1, keepdim=True)
        twins = self.twins.index_select(0, rows.flatten()).view(*rows.shape, *self.twins.shape[1:])  # (*S, J, J)
        starts &= ~(twins & starts[..., None, :]).any(-1)  # an earlier twin starts first
        matched = torch.where(goes_on, matched + 1, starts.long())
        if words is not None:  # a word of its own for a term met (already), where the decoder looks at its source
            free = words.starts[tokens][..., None] & ~(goes_on | starts).any(-1, keepdim=True)  # (*S, 1)
            met = met & ~(free & (self.placed & self.looking & (self.budget == 0))[rows])
        met = met | (matched >= length)
        return matched.masked_fill(met, 0), met

    def extend(
        self, parents: Tensor, tokens: Tensor, words: Words | None = None, progress: tuple[Tensor, Tensor] | None = None
    ) -> Constraints:  # fmt: skip
        """The rows after a step: row i continues row parents[i] with token tokens[i] (`progress`: its matched and
        met (N, J) where the beam step has them already, `chosen`). A word start or punctuation outside a term spends
        a word of every open window, and all of it when the decoder chose it looking at the term's own source words
        (the model's own word for the term); a term just met has AFTER_WORDS words, and one translated twice has
        lost its term (`after`)."""
        matched, met = self.after(parents, tokens, words) if progress is None else progress
        budget, was_met = self.budget.index_select(0, parents), self.met.index_select(0, parents)
        just_met = met & ~was_met  # (N, J)
        fresh = just_met.any(1)
        if words is not None:
            spent = ~words.joins[tokens][:, None] & (matched == 0) & ~met & (budget > 0)
            own = spent & self.looking.index_select(0, parents)  # a word chosen while looking at the term's source
            budget = torch.where(own, 0, budget - spent.long())  # its own word for the term: the window passed
            onward = words.starts[tokens][:, None] & was_met & met & (budget > 0)  # a word after a term met
            budget = torch.where(just_met, AFTER_WORDS, budget - onward.long()).masked_fill_(was_met & ~met, 0)
        pick = lambda x: x.index_select(0, parents)  # noqa: E731
        looking = torch.zeros_like(met)
        return Constraints(pick(self.tokens), pick(self.length), matched, met, pick(self.span), budget, fresh, looking,
                           pick(self.twins))  # fmt: skip

    def chosen(self, progress: tuple[Tensor, Tensor, Tensor], moves: Moves, beams: Beams) -> tuple[Tensor, Tensor]:
        """Every row's matched and met (N, J) after a beam step, from its candidates' `progress` (as `candidates`
        gives it: matched and met (G, K, J), and the order the candidates take the places in (G, K)): a beam row's are
        its chosen candidate's, the other rows have no constraints (a constrained request decodes with a beam) and
        keep theirs."""
        matched, met, order = progress
        j, flat = self.length.shape[1], beams.flat
        at = order.gather(1, moves.chosen.clamp(max=order.shape[1] - 1))[:, :, None].expand(-1, -1, j)  # (G, B, J)
        mine = [p.gather(1, at).flatten(0, 1).index_select(0, flat) for p in (matched, met)]  # (Nb, J) each
        if beams.rows is None:
            return mine[0], mine[1]
        return self.matched.index_copy(0, beams.rows, mine[0]), self.met.index_copy(0, beams.rows, mine[1])

    @cached_property
    def lost(self) -> Tensor:
        """(N, J) bool: placed constraints not met whose window passed (a row can no longer meet them)."""
        return self.placed & (self.budget == 0) & (self.matched == 0) & ~self.met

    def unmet(self) -> Tensor:
        """(N,) bool: rows with a constraint not met that can still be (they may not end with EOS)."""
        return ~(self.met | self.lost).all(1)

    def bank(self, matched: Tensor, met: Tensor, rows: Tensor) -> Tensor:
        """Constraint tokens met by a progress (matched, met (*S, J), matched 0 where met, as `after` gives them) of
        rows `rows` (*S): whole constraints met count their length, and the furthest one under way its tokens matched
        so far (constraints that start alike are under way together: counting each would reward repeating their
        common start)."""
        under_way = F.pad(matched, (0, 1)).amax(-1)  # (*S,) 0 without constraints
        return torch.where(met, self.length[rows], 0).sum(-1) + under_way


def ban(
    scores: Tensor, cons: Constraints, eos_id: int, words: Words | None, best: Tensor | None,
    forced: Tensor | None = None,
) -> Tensor | None:  # fmt: skip
    """Bans in the scores (N, V), in place, EOS where a constraint can still be met and, where `words` are given, a
    token that continues the word of a term just ended; not on rows whose token is forced (`forced` (N,), -1: none):
    a forced prefix is taken as it is. Returns every row's argmax after the bans where `best` (N,) gives it before
    them (else None): on a CPU only the rows whose argmax was banned are searched again (a whole (N, V) mask and
    argmax cost about as much as the rest of the constraint work; a device keeps them, no sync)."""
    unmet, fresh, cpu = cons.unmet(), cons.fresh, scores.device.type == "cpu"
    if forced is not None:
        unmet, fresh = unmet & (forced < 0), fresh & (forced < 0)
    scores[:, eos_id].masked_fill_(unmet, NEG_INF)
    if words is not None and cpu:
        rows = fresh.nonzero()[:, 0]
        if len(rows):
            scores.index_copy_(0, rows, scores.index_select(0, rows).masked_fill_(words.joins, NEG_INF))
    elif words is not None:
        scores.masked_fill_(fresh[:, None] & words.joins, NEG_INF)
    if best is None or not cpu:
        return None if best is None else scores.argmax(1)
    hit = unmet & (best == eos_id)
    if words is not None:
        hit |= fresh & words.joins[best]
    rows = hit.nonzero()[:, 0]
    return best.index_copy(0, rows, scores.index_select(0, rows).argmax(1)) if len(rows) else best


def extra_candidates(
    scores: Tensor, rows: Tensor, cons: Constraints, best: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """For each row of `rows` (R,): its next token of every constraint it has not met, and its own best token, as
    (R, J + 1) tokens and their scores from `scores` (N, V) (-inf where there is none). `best` (N,): every row's
    argmax of `scores` where the step has it already (the greedy rows' choice, taken over every row)."""
    closed = cons.placed & (cons.budget <= 0) & (cons.matched == 0)  # (N, J) a placed term starts only inside its
    nxt = cons.following.masked_fill(cons.met | closed, -1)  # window
    best = row_max(scores)[1] if best is None else best
    tokens = torch.cat([nxt, best[:, None]], 1)  # (N, J + 1)
    safe = tokens.clamp(min=0)
    got = scores.gather(1, safe).masked_fill_(tokens < 0, NEG_INF)  # (N, J + 1): no (N, V) copy
    return safe.index_select(0, rows), got.index_select(0, rows)


def allocate(score: Tensor, bank: Tensor, before: Tensor | None = None) -> Tensor:
    """The order in which a group's candidates (G, K) take its places: round-robin over banks, fullest first, each
    bank's best first; candidates that score -inf last (`before`: the (K, K) mask of j < i, where made already).
    Returns (G, K) positions into the candidates."""
    by_score = score.argsort(dim=1, descending=True, stable=True)  # (G, K)
    b = bank.gather(1, by_score)
    before = _before(score.shape[1], score.device) if before is None else before  # j before i in score order
    rank = ((b[:, :, None] == b[:, None, :]) & before).sum(2)  # (G, K) the candidate's place within its bank
    top = bank.amax(1, keepdim=True) + 1
    key = rank * top + (top - 1 - b)
    key = key.masked_fill(score.gather(1, by_score) == NEG_INF, torch.iinfo(key.dtype).max)
    return by_score.gather(1, key.argsort(dim=1, stable=True))


def _before(k: int, device: torch.device) -> Tensor:
    """(K, K) bool: j < i at [i, j] (not a tril, which on a CPU runs every call threaded, grain 0)."""
    at = torch.arange(k, device=device)
    return at[None, :] < at[:, None]


def candidates(
    top: tuple[Tensor, Tensor, Tensor], scores: Tensor, cum: Tensor, cons: Constraints, beams: Beams,
    best: Tensor | None = None, words: Words | None = None,
) -> tuple[tuple[Tensor, ...], tuple[Tensor, Tensor, Tensor]]:  # fmt: skip
    """Each beam group's candidates in the order they take its places: its best ones `top` (cumulative score, parent
    place, token, each (G, M)) and every row's constraint tokens and own best token (duplicates dropped), allocated
    over banks (the tokens a candidate met, less those of the constraints its parent lost: "No se pudo ... la base de
    datos", which let "servidor" pass, is not in the bank of "El servidor ... la base de dato"), with the count of
    constraints each leaves unmet and the count its parent has lost; and each one's progress, matched and met
    (G, K, J) in the candidates' first order, with the order they take the places in (G, K) (`Constraints.chosen`).
    Scores (N, V), cumulative scores (N,) and, where the step has them, argmaxes (N,) of every row; `words`: the
    vocabulary's word starts (a term translated twice is lost, `Constraints.after`)."""
    rows = beams.rows if beams.rows is not None else torch.arange(scores.shape[0], device=scores.device)
    best = row_max(scores)[1] if best is None else best  # (N,)
    tokens, got = extra_candidates(scores, rows, cons, best)  # (Nb, J + 1)
    g, w, e = beams.groups, beams.width, tokens.shape[1]
    base = cum.index_select(0, rows)[:, None]  # (Nb, 1)
    got = (got + base).masked_fill_(base <= DEAD / 2, NEG_INF)  # a DEAD row's (a place not taken): never candidates
    if not beams.full:  # rows into the (G*W, J+1) grid, -inf past a narrower group's
        got = got.new_full((g * w, e), NEG_INF).index_copy_(0, beams.slots, got)
        tokens = tokens.new_zeros(g * w, e).index_copy_(0, beams.slots, tokens)
    place = (torch.arange(w * e, device=tokens.device) // e).expand(g, -1)  # (G, W*(J+1)) each one's parent place
    score = torch.cat([top[0], got.view(g, -1)], 1)  # (G, K)
    parent = torch.cat([top[1], place], 1)
    token = torch.cat([top[2], tokens.view(g, -1)], 1)
    key = parent * scores.shape[1] + token  # a candidate is (parent, token): keep the first of each
    before = _before(key.shape[1], key.device)
    score = score.masked_fill(((key[:, :, None] == key[:, None, :]) & before).any(2), NEG_INF)  # an earlier one's
    at = (beams.knobs.first[:, None] + parent).clamp(max=scores.shape[0] - 1)  # (G, K) rows (padding: any, -inf)
    matched, met = cons.after(at, token, words, best)
    lost = cons.lost[at]  # (G, K, J) constraints its parent can no longer meet
    pick = allocate(score, (cons.bank(matched, met, at) - (cons.length[at] * lost).sum(-1)).clamp_(min=0), before)
    unmet, lost = (~met).sum(-1), lost.sum(-1)  # (G, K) constraints a candidate leaves unmet, its parent lost
    chosen = tuple(x.gather(1, pick) for x in (score, parent, token, unmet, lost))
    return chosen, (matched, met, pick)
