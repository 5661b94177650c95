"""The word before a placed glossary term made to agree with the term (gender, number: "una ventanal" -> "un
ventanal"), and a term that opens the output given its article where the language wants one. The model says which
form the term takes: its scores of the term after each form's article, over a few neutral sources (`Probe`). A word
before the term that fits another form (`Word`, from the target language's table) is swapped for its own word of that
form, and the output is decoded again from there, the words after the term following it. The tables are the caller's
(language data); here everything is token ids."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from model.runner import Runner
from model.runner.fallback import placed, places
from model.runner.loop import pad_batch
from model.runner.params import DecodeParams, Probe, Word

MARGIN = 1.0  # nats by which the model's choice must beat what the output holds to change it


@torch.inference_mode()
def token_logprobs(runner: Runner, pairs: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> list[list[float]]:
    """Each (source ids, target ids) pair's log-probability of every target token, teacher-forced."""
    cfg, device = runner.cfg, runner.device
    src, src_mask = pad_batch([list(s) for s, _ in pairs], cfg.pad_id, device)
    tgt, _ = pad_batch([[cfg.decoder_start_id, *t] for _, t in pairs], cfg.pad_id, device)  # (B, T + 1)
    logits = runner.decode(runner.encode(src, src_mask), src_mask, tgt[:, :-1])  # (B, T, V)
    picked = logits.float().log_softmax(-1).gather(-1, tgt[:, 1:, None])[..., 0]  # (B, T)
    return [row[: len(t)] for row, (_, t) in zip(picked.tolist(), pairs, strict=True)]


def likelihoods(runner: Runner, pairs: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> list[float]:
    """Each (source ids, target ids) pair's log-probability of the target, teacher-forced (no EOS)."""
    return [sum(row) for row in token_logprobs(runner, pairs)]


def probe(runner: Runner, p: Probe) -> list[float]:
    """Each form's score for the term: the log-probability of the form's article and the term, summed over the
    sources, plus its prior."""
    sums = likelihoods(runner, [(s, f) for s in p.sources for f in p.forms])  # source-major
    return [sum(sums[i :: len(p.forms)]) + prior for i, prior in enumerate(p.prior)]


def redo(
    params: DecodeParams, tokens: list[int], scores: Callable[[Probe], list[float]],
    likely: Callable[[list[tuple[int, ...]]], list[float]],
) -> DecodeParams | None:  # fmt: skip
    """The parameters that decode again with the first term that disagrees with the word before it mended (the
    output up to the term forced, the term placed by it), or None when all agree. `scores`: a probe's form scores
    (cached by the caller); `likely`: outputs' log-probabilities for the request's source. A word before a term that
    fits another form is swapped for its word of the model's form; a term capitalised to open the output gets the
    article of its form before it, in its own case, where the model likes that better, with the probe's `article`
    nats ("Contraseñas deben" -> "Las contraseñas deben"), and is lowered where the output put words before it ("Las
    Contraseñas" -> "Las contraseñas"); a lowercase term that opens the output of a sentence starting with a capital
    gets its article or a capital ("comercio en la esquina" -> "El comercio en la esquina"). Each retry mends one
    more occurrence, for good."""
    agreement, cons = params.agreement, params.constraints
    if agreement is None:
        return None
    terms = {i for c in set(cons) for at in places(tokens, c) for i in range(at, at + len(c))}  # never mended
    stood = {a for a, _ in params.mended}  # where a term stands in for the model's word (a mended word is no term)
    for j, term in enumerate(cons):
        p, twins = agreement.probes[j], [k for k, c in enumerate(cons) if c == term]
        if p is None or twins[0] != j:
            continue  # twins share the first one's probe; the k-th occurrence is the k-th twin's
        found = places(tokens, term)
        for at, k in zip(found, twins, strict=False):
            if at in stood:
                continue  # it stands in for the model's own word, whose article it has (`unfinished`)
            if p.lower and term != p.lower and at > int(params.forced_bos_id is not None):  # words came first: lower
                lowered = tuple(p.lower if c == term else c for c in cons)
                prefix = (*tokens[:at], *p.lower)
                return placed(dataclasses.replace(params, constraints=lowered), prefix, k)
            word = agreement.before(tokens, at)
            if word is not None and terms & set(range(at - len(word.ids), at)):
                continue  # the word before is another term ("esta" for "this"): the user's, as written
            if word is None and not (at == 0 and (p.lower or p.upper and term != p.upper)):
                continue
            score = scores(p)
            best = max(range(len(score)), key=score.__getitem__)
            if word is None:  # the term opens the output: with its article, else with a capital
                opened = (*agreement.openers[best], *(p.lower or term))
                ours, article = likely([p.upper or term, opened])
                if article + p.article - ours >= MARGIN and len(opened) < params.max_new_tokens:
                    lowered = tuple(p.lower if c == term else c for c in cons) if p.lower else cons
                    article_at = (0, len(agreement.openers[best]))
                    mended = dataclasses.replace(params, constraints=lowered, mended=(*params.mended, article_at))
                    return placed(mended, opened, k)
                if p.lower:
                    continue  # capitalised already
                raised = tuple(p.upper if c == term else c for c in cons)
                return placed(dataclasses.replace(params, constraints=raised), p.upper, k)
            variant = preferred(word, score)
            if variant is None:
                continue
            start = at - len(word.ids)
            prefix = (*tokens[:start], *variant, *term)
            if len(prefix) >= params.max_new_tokens:
                return None
            swapped = (start, start + len(variant))
            return placed(dataclasses.replace(params, mended=(*params.mended, swapped)), prefix, k)
    return None


def preferred(word: Word, score: list[float]) -> tuple[int, ...] | None:
    """`word` in the form a term's form scores prefer (its own ids), where it fits another form and the preferred one
    wins by MARGIN over those it fits; else None."""
    best = max(range(len(score)), key=score.__getitem__)
    if best in word.fits or not word.variants[best] or score[best] - max(score[f] for f in word.fits) < MARGIN:
        return None
    return word.variants[best]
