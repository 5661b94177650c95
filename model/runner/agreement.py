"""The word before a placed glossary term made to agree with the term (gender, number: "una ventanal" -> "un
ventanal"). The model says which form the term takes: its scores of the term after each form's article, over a few
neutral sources (`Probe`). A word before the term that fits another form (`Word`, from the target language's table)
is swapped for its own word of that form, and the output is decoded again from there, the words after the term
following it. The tables are the caller's (language data); here everything is token ids."""

from __future__ import annotations

from collections.abc import Callable

import torch

from model.runner import Runner
from model.runner.fallback import placed
from model.runner.loop import pad_batch
from model.runner.params import DecodeParams, Probe

MARGIN = 1.0  # nats by which the model's form for the term must beat the best form the word fits to swap it


@torch.inference_mode()
def probe(runner: Runner, p: Probe) -> list[float]:
    """Each form's score for the term: the log-probability of the form's article and the term, summed over the
    sources, plus its prior."""
    cfg, device = runner.cfg, runner.device
    pairs = [(s, f) for s in p.sources for f in p.forms]
    src, src_mask = pad_batch([list(s) for s, _ in pairs], cfg.pad_id, device)
    tgt, tgt_mask = pad_batch([[cfg.decoder_start_id, *f] for _, f in pairs], cfg.pad_id, device)  # (B, T + 1)
    logits = runner.decode(runner.encode(src, src_mask), src_mask, tgt[:, :-1])  # (B, T, V)
    picked = logits.float().log_softmax(-1).gather(-1, tgt[:, 1:, None])[..., 0]  # (B, T)
    sums = (picked * tgt_mask[:, 1:]).sum(1).view(len(p.sources), len(p.forms)).sum(0)  # (F,)
    return [s + prior for s, prior in zip(sums.tolist(), p.prior, strict=True)]


def redo(params: DecodeParams, tokens: list[int], scores: Callable[[Probe], list[float]]) -> DecodeParams | None:
    """The parameters that decode again with the first word before a term that disagrees with it swapped (the
    output up to the term forced, the term placed by it), or None when every such word agrees. `scores`: a probe's
    form scores (cached by the caller). A swapped word fits the term's form afterwards: each retry mends one more
    occurrence."""
    agreement, cons = params.agreement, params.constraints
    if agreement is None:
        return None
    for j, term in enumerate(cons):
        p, twins = agreement.probes[j], [k for k, c in enumerate(cons) if c == term]
        if p is None or twins[0] != j:
            continue  # twins share the first one's probe; the k-th occurrence is the k-th twin's
        found = [i for i in range(1, len(tokens) - len(term) + 1) if tuple(tokens[i : i + len(term)]) == term]
        for at, k in zip(found, twins, strict=False):
            word = agreement.before(tokens, at)
            if word is None:
                continue
            score = scores(p)
            best = max(range(len(score)), key=score.__getitem__)
            if best in word.fits or not word.variants[best] or score[best] - max(score[f] for f in word.fits) < MARGIN:
                continue
            prefix = (*tokens[: at - len(word.ids)], *word.variants[best], *term)
            return placed(params, prefix, k) if len(prefix) < params.max_new_tokens else None
    return None
