"""The roofline's arithmetic, by hand on a tiny shape, against a real network's parameters and on made-up CPU rates,
and its measurements on tiny shapes."""

from types import SimpleNamespace

import pytest
import torch

from bench.harness.fixtures import tiny_config
from bench.roofline import (
    Bound,
    Rates,
    Work,
    best_of,
    bound,
    cell_bound,
    cell_rows,
    cell_work,
    copy_bandwidth,
    device_seconds,
    kernel_kinds,
    kernels_of,
    matmul_flops,
    matmul_rate,
    measure,
    multiples,
    profile_steps,
    step_flops,
    step_parameters,
    step_work,
)
from bench.roofline import split as split_events
from model.network.transformer import Seq2SeqTransformer

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
    assert len(kernels_of(lambda: torch.mm(a, b).add_(1).relu_(), CPU)) == 3
    at = torch.zeros(1, dtype=torch.long)
    kinds = kernel_kinds(kernels_of(lambda: torch.mm(a, b).add_(1).relu_().index_select(0, at), CPU))
    assert {k: n for k, (n, _) in kinds.items()} == {"matmul": 1, "index and copy": 1, "elementwise": 2}


RATES = Rates(threads=1, packed=100.0, dense=50.0, int8=400.0, bf16=200.0, dram=10.0, l3=40.0)


def test_a_cells_mean_step_in_each_precisions_bytes():
    """16 new tokens: mean span 8.5; float32 weights and K/V 4 bytes, int8 weights 1 byte with float32 K/V, bfloat16
    2 and 2."""
    assert cell_work(small(), "float32", 2, 16, 5.0) == step_work(small(), 2, 8.5, 5.0, element=4, kv=4)
    int8 = cell_work(small(), "int8", 2, 16, 5.0)
    assert int8.weights == (260 + 2 * 2 * 4) * 1 and int8.kv == 2 * 1 * 2 * (8.5 + 5) * 4 * 4
    assert cell_work(small(), "bfloat16", 2, 16, 5.0) == step_work(small(), 2, 8.5, 5.0, element=2, kv=2)


@pytest.mark.parametrize(("precision", "rate"), [("float32", 100.0), ("int8", 400.0), ("bfloat16", 200.0)])
def test_bounds_are_bytes_over_bandwidth_and_flops_over_the_precisions_gemm_rate(precision, rate):
    """Each bound in seconds; the roofline is the larger of the L3 and compute bounds."""
    work = cell_work(small(), precision, 3, 8, 6.0)
    got = bound(small(), precision, 3, 8, 6.0, RATES)
    assert got.dram == pytest.approx(work.bytes / 10.0) and got.l3 == pytest.approx(work.bytes / 40.0)
    assert got.compute == pytest.approx(work.flops / rate)
    assert got.gemm == pytest.approx(matmul_flops(small(), 3) / rate) and got.gemm < got.compute
    assert got.kv == pytest.approx(work.kv / 40.0)
    assert got.roofline == max(got.l3, got.compute)


def test_a_cells_bound_is_the_mean_over_its_batches():
    """A batch of 2 sources (lengths 3 and 5) and one of 1 (length 6): the mean of their bounds, 2 x new steps."""
    parts = [[[1] * 3, [1] * 5], [[1] * 6]]
    got, steps = cell_bound(small(), "float32", parts, beam=2, new=8, rates=RATES)
    a, b = bound(small(), "float32", 4, 8, 4.0, RATES), bound(small(), "float32", 2, 8, 6.0, RATES)
    assert steps == 16
    assert got.compute == pytest.approx((a.compute + b.compute) / 2) and got.l3 == pytest.approx((a.l3 + b.l3) / 2)


def test_the_best_rates_of_several_measurements():
    """Per rate, the larger: a loaded 2-thread run does not loosen the bound below the 1-thread one."""
    two = Rates(threads=2, packed=150.0, dense=40.0, int8=300.0, bf16=250.0, dram=12.0, l3=30.0)
    assert best_of(RATES, two) == Rates(2, 150.0, 50.0, 400.0, 250.0, 12.0, 40.0)


def test_profiled_time_split_by_op_kind():
    """The linear layers' ops are GEMMs, the batched matmuls and softmax attention, the others the rest."""
    event = lambda key, us: SimpleNamespace(key=key, self_cpu_time_total=us)  # noqa: E731
    events = [event("mkldnn::_linear_pointwise", 3e6), event("quantized::linear_dynamic", 1e6)]
    events += [event("aten::bmm", 2e6), event("aten::_softmax", 1e6), event("aten::argmax", 0.5e6)]
    assert split_events(events) == {"gemm": 4.0, "attention": 3.0, "rest": 0.5}


def test_a_cells_rows_show_multiples_of_the_bounds():
    """ours ran 2 ms against a 1 ms roofline: 2.0x; its GEMM half (1 ms) against a 0.5 ms GEMM bound 2.0x; the
    multiples use the time the engine ran, the wall time stands beside it."""
    b = Bound(dram=0.004, l3=0.001, compute=0.0008, gemm=0.0005, kv=0.0002)
    share = {"gemm": 0.5, "attention": 0.25, "rest": 0.25}
    (row,) = cell_rows("greedy | 64", {"float32": b}, {"float32": (0.002, 0.005, share)}, {"float32": (0.003, 0.004)})
    assert row == "| greedy | 64 | float32 | 1.00 / 4.00 / 0.80 | 2.00 (2.0x); wall 5.00 | 1.00 (2.0x) | 0.50 (2.5x) " \
        "| 0.50 | 3.00 (3.0x); wall 4.00 |"  # fmt: skip


def test_measurements_and_the_profile_run_on_tiny_shapes():
    """Every rate is positive; the profile's shares of a real network's steps add up to one, GEMMs among them."""
    rates = measure(1, rows=16, size=32, dram=1 << 20, l3=1 << 16)
    assert all(getattr(rates, k) > 0 for k in ("packed", "dense", "int8", "bf16", "dram", "l3"))
    torch.manual_seed(0)
    model = Seq2SeqTransformer(tiny_config(50)).eval()
    shares = profile_steps(model, [[5, 6, 7, 1], [8, 9, 1]], beam=2, new=6, steps=2)
    assert sum(shares.values()) == pytest.approx(1.0) and shares["gemm"] > 0
