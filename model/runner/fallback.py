"""A glossary term the decoder could not place (its window passed without it): decode again with the output up to the
word the term's source aligns to, and the term, forced; the words after it follow the term."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from model.runner import Runner
from model.runner.align import alignments
from model.runner.params import ANYWHERE, DecodeParams


def missing(params: DecodeParams, tokens: list[int], joins: list[bool] | None = None) -> int | None:
    """The first constraint the output `tokens` does not hold (a term wanted twice needs two occurrences; `joins`:
    the target tokens that continue a word, where only whole-word occurrences count), or None."""
    for j, term in enumerate(params.constraints):
        wanted = params.constraints[: j + 1].count(term)
        if len(places(tokens, term, joins)) < wanted:
            return j
    return None


def unplaced_twin(
    params: DecodeParams, tokens: list[int], aligned: list[int], j: int, joins: list[bool] | None = None
) -> int:  # fmt: skip
    """Of constraint j and its twins (a term wanted once per source occurrence), the first placed one that no
    occurrence of the term in `tokens` aligns to (`aligned`: each token's source position), else j: "La balda vieja
    ... la nueva repisa" misses the first shelf's, not the second's."""
    term = params.constraints[j]
    found = [aligned[i : i + len(term)] for i in places(tokens, term, joins)]
    for k, c in enumerate(params.constraints):
        span = params.constraint_spans[k]
        if c == term and span != ANYWHERE and not any(span[1] <= p < span[2] for at in found for p in at):
            return k
    return j


def places(tokens: list[int], term: tuple[int, ...], joins: list[bool] | None = None) -> list[int]:
    """Where each occurrence of `term` starts in `tokens` (with `joins`, those the next token does not go on:
    "bici" is not in "bicicleta")."""
    n = len(term)
    found = [i for i in range(len(tokens) - n + 1) if tuple(tokens[i : i + n]) == term]
    return [i for i in found if joins is None or i + n == len(tokens) or not joins[tokens[i + n]]]


def placed(params: DecodeParams, prefix: tuple[int, ...], j: int) -> DecodeParams:
    """`params` with `prefix` forced, which ends with constraint `j`: it is placed by it (anywhere); of the spans that
    are not the model's words (`mended`), those before it stay."""
    spans = tuple(ANYWHERE if k == j else s for k, s in enumerate(params.constraint_spans))
    kept = tuple(m for m in params.mended if m[1] <= len(prefix) - len(params.constraints[j]))
    return dataclasses.replace(params, prefix=prefix, constraint_spans=spans, mended=kept)


def redo(
    runner: Runner, starts: list[bool], src: list[int], params: DecodeParams, tokens: list[int],
    joins: list[bool] | None = None, likely: Callable[[list[tuple[int, ...]]], list[float]] | None = None,
    spell: Callable[[list[int]], str] | None = None,
) -> DecodeParams | None:  # fmt: skip
    """The parameters that decode `src` again with its first missing placed term forced where its source aligns in
    the output `tokens` (at the start of the word there; `starts`: each target token starts a word; `joins`: it goes
    on with one, so a term inside a longer word is missing) after the prefix forced so far, or None when nothing is
    missing, the missing term was forced already, or nothing of the output after the prefix aligns to the term's
    source. Where several words there align to the term's source ("de letra" for "font"), the term takes the place of
    those after the word the model likes best (`likely`: outputs' log-probabilities): "el tamaño de fuente", not "el
    tamaño fuente"; the word it replaces may not follow it ("un auto coche nuevo"); the model's own word in the term's
    other gender (`spell`: tokens' letters) is where the term goes, wherever the alignment falls ("Ella es una abogada
    muy buena", not "un abogado muy abogada"). Each retry forces one more term: there are at most as many."""
    j = missing(params, tokens, joins) if params.constraint_spans else None
    if j is None:
        return None
    aligned = alignments(runner, [(src, tokens)])[0]
    j = unplaced_twin(params, tokens, aligned, j, joins)
    if params.constraint_spans[j] == ANYWHERE:
        return None
    window, start, end = params.constraint_spans[j]
    places = list(enumerate(aligned))[len(params.prefix) :]
    at = next((t for t, p in places if start <= p < end), None)
    if at is None:
        at = next((t for t, p in places if window <= p < end), None)
    if at is None:
        return None
    while at > len(params.prefix) and not starts[tokens[at]]:
        at -= 1
    if likely is not None:
        joined = joins or [not s for s in starts]
        at = _likeliest(tokens, aligned, starts, joined, at, (start, end), params.constraints[j], likely)
    term = params.constraints[j]
    if spell is not None:  # the model's own word in the term's other gender, wherever the alignment put it
        at = next(iter(_variants(tokens, starts, joins, len(params.prefix), term, spell)), at)
    prefix = (*tokens[:at], *term)
    if len(prefix) >= params.max_new_tokens:
        return None
    replaced = ((*term, tokens[at]),) if at < len(tokens) and tokens[at] != term[0] else ()
    return placed(dataclasses.replace(params, bad_words_ids=(*params.bad_words_ids, *replaced)), prefix, j)


def _variants(
    tokens: list[int], starts: list[bool], joins: list[bool] | None, begin: int, term: tuple[int, ...],
    spell: Callable[[list[int]], str],
) -> list[int]:  # fmt: skip
    """Where the words from `begin` on that are `term` in another gender start ("un abogado muy bueno" for "abogada",
    where the alignment put "lawyer" on "bueno"; `spell`: tokens' letters)."""
    joined, spelled = joins or [not s for s in starts], spell(list(term))
    words = [(a, _word_end(tokens, a, joined)) for a in range(begin, len(tokens)) if starts[tokens[a]]]
    return [a for a, b in words if variant(spell(tokens[a:b]), spelled)]


def _word_end(tokens: list[int], a: int, joins: list[bool]) -> int:
    """Where the word starting at `a` ends: the first token after it that does not go on with it."""
    return next((t for t in range(a + 1, len(tokens)) if not joins[tokens[t]]), len(tokens))


def _likeliest(
    tokens: list[int], aligned: list[int], starts: list[bool], joins: list[bool], at: int, span: tuple[int, int],
    term: tuple[int, ...], likely: Callable[[list[tuple[int, ...]]], list[float]],
) -> int:  # fmt: skip
    """Of the words from `at` on that align to the source `span` (the model's words for the term, with the words that
    join them to the sentence: "de letra"), the start of the one the term replaces best: the output with the term in
    place of that word and those after it in the run, the words before it kept, the model likes most (`starts`: each
    target token starts a word, `joins`: it goes on with one)."""
    run, a = [], at  # (start, end) of each word, one after another from `at`
    while a < len(tokens) and starts[tokens[a]]:
        b = _word_end(tokens, a, joins)
        if not any(span[0] <= p < span[1] for p in aligned[a:b]):
            break
        run.append((a, b))
        a = b
    if len(run) < 2:
        return at
    end = run[-1][1]
    scores = likely([(*tokens[:a], *term, *tokens[end:]) for a, _ in run])
    return run[max(range(len(run)), key=scores.__getitem__)][0]


def variant(own: str, term: str) -> bool:
    """Whether a term is the model's own word in another gender ("jefa" for its "jefe", "profesora" for "profesor"),
    spelled as `letters` gives them: the words after it then follow the model's word, whose own context it is ("Mi
    jefe está de vacaciones": "Mi jefa es en lunes" was the term's)."""
    if own.endswith("s") and term.endswith("s"):  # plurals: "jefes", "jefas"
        own, term = own[:-1], term[:-1]
    vowels = len(own) == len(term) and own[:-1] == term[:-1] and own[-1:] in ("e", "o") and term[-1:] == "a"
    return len(own) >= 3 and own != term and (vowels or term == own + "a")
