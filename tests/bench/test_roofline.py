"""The roofline's arithmetic, by hand on a tiny shape and against a real network's parameters, and its measurements."""

import pytest
import torch

from bench.harness.fixtures import tiny_config
from bench.roofline import (
    Work,
    copy_bandwidth,
    count_kernels,
    device_seconds,
    matmul_rate,
    multiples,
    step_flops,
    step_parameters,
    step_work,
)
from model.transformer import Seq2SeqTransformer

CPU = torch.device("cpu")


def small(**overrides):
    """d_model 4, one decoder layer, ffn 8, vocab 10, post-LN, no logits bias."""
    return tiny_config(
        10, **{"d_model": 4, "n_heads": 2, "decoder_layers": 1, "d_ff": 8, "pre_norm": False, **overrides}
    )


def test_parameters_of_a_step_by_hand():
    """Self Q/K/V/O 4(16+4), cross Q/O 2(16+4), FFN 2*4*8+8+4, 3 norms 3*2*4, output 10*4: 260; plus the final
    norm (pre-LN) 8, the logits bias 10, an embedding norm 8."""
    assert step_parameters(small()) == 80 + 40 + 76 + 24 + 40 == 260
    assert step_parameters(small(pre_norm=True)) == 268
    assert step_parameters(small(pre_norm=True, final_logits_bias=True, embed_norm=True)) == 286


def test_work_of_a_step_by_hand():
    """2 rows, span 3, source 5, fp16 weights and K/V, float32 logits."""
    work = step_work(small(), rows=2, span=3, source=5, element=2, logit=4)
    assert work.weights == (260 + 2 * 2 * 4) * 2  # + a token and a position row per row
    assert work.kv == 2 * 1 * 2 * (3 + 5) * 4 * 2  # K and V, layers, rows, positions, d_model, bytes
    assert work.logits == 2 * 10 * 4
    # per row: matmuls 64 + 32 + 64 + 40 multiply-adds, attention (3 + 3 + 5 + 5) * 4: 264; 2 FLOPs each, 2 rows
    assert work.flops == step_flops(small(), 2, 3, 5) == 2 * 2 * 264
    assert work.bytes == work.weights + work.kv + work.logits


@pytest.mark.parametrize("overrides", [{}, {"pre_norm": True, "final_logits_bias": True, "tie_output": False}])
def test_parameters_equal_what_the_network_reads_in_a_step(overrides):
    """The decoder's parameters less the cross-attention K/V projections (used at prefill), with the final norm, the
    output projection and its bias: counted on a real network."""
    cfg = tiny_config(50, **overrides)
    model = Seq2SeqTransformer(cfg)
    prefill = ("cross_attn.k_proj", "cross_attn.v_proj")
    decoder = sum(p.numel() for n, p in model.decoder.named_parameters() if not any(k in n for k in prefill))
    rest = sum(p.numel() for p in model.decoder_norm.parameters()) + model.out_proj.weight.numel()
    bias = 0 if model.final_logits_bias is None else model.final_logits_bias.numel()
    assert step_parameters(cfg) == decoder + rest + bias


def test_multiples_of_the_bounds():
    """1000 bytes at 100 B/s is 10 s, 50 FLOPs at 10 FLOP/s 5 s: a 20 s step is 2x memory, 4x compute, 2x roofline."""
    got = multiples(20.0, Work(weights=600, kv=300, logits=100, flops=50), bandwidth=100.0, flop_rate=10.0)
    assert got == {"memory": 2.0, "compute": 4.0, "roofline": 2.0}


def test_measurements_run_on_a_cpu():
    """Copy bandwidth and matmul rate are positive; a call's time too; kernels count the top-level ops."""
    assert copy_bandwidth(CPU, 1 << 20, 2) > 0
    assert matmul_rate(CPU, torch.float32, 64, 2) > 0
    assert device_seconds(lambda: torch.ones(8), 2, CPU) > 0
    a, b = torch.ones(1, 4), torch.ones(4, 1)
    assert count_kernels(lambda: torch.mm(a, b).add_(1).relu_(), CPU) == 3
