"""Glossary terms placed by alignment on OPUS-MT- and NLLB-shaped checkpoints (tiny random ones the tests make): the
aligning layer each names, its alignment a distribution over each row's real source tokens whatever the batch, the
logits unchanged by reading it, and terms kept whole words in every output."""

import pytest
import torch

from model.loading.checkpoint import load
from model.runner.align import alignments
from model.runner.constraints import Words
from model.runner.eager import Eager
from model.runner.generate import generate
from model.runner.loop import DecodeLoop
from model.runner.params import DecodeParams
from model.runner.search import Request

pytest.importorskip("transformers")

TEXTS = ["the cat runs", "a big red house near the river", "hello world"]


@pytest.fixture(scope="module", params=["marian", "multi", "nllb"])
def shaped(request, tmp_path_factory):
    """(checkpoint, source prefix) of a tiny random OPUS-MT, multi-target OPUS-MT or NLLB model."""
    from bench.harness.fixtures import make_m2m100, make_marian

    out = tmp_path_factory.mktemp(request.param)
    if request.param == "nllb":
        ck = load(make_m2m100(out / "tiny-nllb", "nllb", seed=3))
        return ck, ck.languages.prefix("en", "es")
    targets = ("fr", "pt") if request.param == "multi" else ()
    ck = load(make_marian(out / ("opus-mt-en-ROMANCE" if targets else "opus-mt-en-es"), seed=3, targets=targets))
    return ck, ck.languages.prefix("en", "fr" if targets else "es")


def test_each_shape_names_its_aligning_layer(shaped):
    # catches: a Marian checkpoint read at another layer than the one guided alignment trains (its last, head 0)
    ck, _ = shaped
    layer, heads = ck.config.alignment
    if ck.config.final_logits_bias and ck.config.pe_layout == "halves":  # Marian
        assert (layer, heads) == (ck.config.decoder_layers - 1, (0,))
    else:
        assert layer == 1 and heads == tuple(range(ck.config.n_heads))


@torch.inference_mode()
def test_the_alignment_is_each_rows_own_and_leaves_the_logits_alone(shaped):
    # catches: alignment read over another row's source or over padding, or a step that changes the logits to read it
    ck, prefix = shaped
    runner = Eager(ck.model)
    srcs = [prefix + ck.tokenizer.encode(t) for t in TEXTS]
    mixed = [Request(i, s, DecodeParams(beam_size=1 + i % 2)) for i, s in enumerate(srcs)]
    logits, align = runner.step_aligned(_prepared(runner, mixed).state)
    assert torch.equal(logits, runner.step_logits(_prepared(runner, mixed).state))
    lengths = [len(s) for s in srcs]
    rows = [i for i, s in enumerate(srcs) for _ in range(1 + i % 2)]
    for r, i in enumerate(rows):
        assert torch.allclose(align[r, : lengths[i]].sum(), torch.tensor(1.0)) and not align[r, lengths[i] :].any()
        alone = _prepared(runner, [Request(0, srcs[i], DecodeParams())])
        assert torch.allclose(runner.step_aligned(alone.state)[1][0], align[r, : lengths[i]], atol=1e-6)


def _prepared(runner: Eager, requests: list[Request]) -> DecodeLoop:
    """A decode loop with `requests` joined, its state prepared for their first step."""
    loop = DecodeLoop(runner)
    loop.join(loop.prefill(requests))
    loop.state.prepare()
    return loop


@torch.inference_mode()
def test_terms_stay_whole_words_in_every_output(shaped):
    # catches: a term whose next token continues its word (the whole-word mask not applied); the term's first
    # occurrence is the one that met it (a random model may write its tokens again, as a word of its own)
    ck, prefix = shaped
    tok = ck.tokenizer
    words = Words.of(tok.target_pieces(ck.config.tgt_vocab_size), ck.model.device)
    term = tuple(tok.encode_target("casa"))
    reqs = []
    for i, text in enumerate(TEXTS):
        first_word = [(0, len(text.split()[0]))]
        spans = tuple(tuple(k + len(prefix) for k in s) for s in tok.source_spans(text, first_word))
        params = DecodeParams(max_new_tokens=16).constrained((term,), spans=spans)
        reqs.append(Request(i, prefix + tok.encode(text), params))
    joins = words.joins.tolist()
    for hyps in generate(ck.model, reqs, words=words):
        out = hyps[0].tokens
        k = next((k for k in range(len(out) - len(term) + 1) if tuple(out[k : k + len(term)]) == term), None)
        if k is not None and k + len(term) < len(out):
            assert not joins[out[k + len(term)]], out


@torch.inference_mode()
def test_the_steps_alignment_equals_the_teacher_forced_one(shaped):
    # catches: an alignment read at another layer or position than the full recomputation reads (the markup's places)
    ck, prefix = shaped
    runner = Eager(ck.model)
    srcs = [prefix + ck.tokenizer.encode(t) for t in TEXTS]
    loop = _prepared(runner, [Request(i, s, DecodeParams(max_new_tokens=6)) for i, s in enumerate(srcs)])
    stepped, outs = [], [[] for _ in srcs]
    for _ in range(5):
        loop.state.prepare()  # room for the next position (the first call's work is done already)
        logits, align = runner.step_aligned(loop.state)
        stepped.append(align.argmax(1).tolist())
        tokens = logits.argmax(1)
        for i, t in enumerate(tokens.tolist()):
            outs[i].append(t)
        loop.state.tokens = tokens
        loop.state.count_step()
    want = [[row[i] for row in stepped] for i in range(len(srcs))]
    assert alignments(runner, list(zip(srcs, outs, strict=True))) == want
