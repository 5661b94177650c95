"""The static-shape decode step of bench.compiled_step against the model's own eager step, uncompiled and compiled."""

import torch

from bench.compiled_step import Compiler, mid_state
from bench.harness.fixtures import tiny_config
from model.transformer import Seq2SeqTransformer

SOURCES = [[5, 6, 7, 8, 1], [9, 10, 1], [11, 12, 13, 1]]  # rows of different source lengths


def tiny() -> Seq2SeqTransformer:
    """A random pre-norm model, d_model 16, 2+2 layers."""
    torch.manual_seed(0)
    cfg = tiny_config(40, d_model=16, n_heads=2, encoder_layers=2, decoder_layers=2, d_ff=32)
    return Seq2SeqTransformer(cfg).init_weights().eval()


@torch.inference_mode()
def check(variant: str, tolerance: float) -> Compiler:
    """Mid-decode (5 steps), the variant's step on the static buffers equals the eager step on the same cache, and
    both write the same keys and values at each row's position."""
    model = tiny()
    _, cache, key, args = mid_state(model, SOURCES, 5)
    n, compiler = cache.rows, Compiler(model, variant)
    got = compiler(*key, *args)[:n].clone()
    keys = cache.k_buf[:, :n].clone()
    want = model.step_logits(args[0][:n], cache)
    assert key == (3, 32, 32) and torch.allclose(got, want, atol=tolerance, rtol=0)
    assert torch.allclose(keys, cache.k_buf[:, :n], atol=tolerance, rtol=0)
    return compiler


def test_the_static_step_equals_the_eager_step():
    """Uncompiled: the padded span and the position mask change nothing."""
    check("static-fp32", 1e-6)


def test_the_compiled_step_equals_the_eager_step_and_compiles_each_shape_once():
    """inductor with freezing and oneDNN linears; a second call of the same key compiles no graph."""
    compiler = check("inductor-onednn", 1e-5)
    graphs = Compiler.graphs()
    with torch.inference_mode():
        _, _, key, args = mid_state(tiny(), SOURCES, 5)  # new buffers of the same shapes
        compiler(*key, *args)
    assert Compiler.graphs() == graphs and list(compiler.seconds) == [key]
