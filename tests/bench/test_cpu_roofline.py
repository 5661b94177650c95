"""The CPU roofline's arithmetic by hand on made-up rates, and its measurements on tiny shapes."""

from types import SimpleNamespace

import pytest
import torch

from bench.cpu_roofline import Bound, Rates, best_of, bound, cell_bound, cell_rows, cell_work, measure, profile_steps
from bench.cpu_roofline import split as split_events
from bench.harness.fixtures import tiny_config
from bench.roofline import matmul_flops, step_work
from model.transformer import Seq2SeqTransformer

RATES = Rates(threads=1, packed=100.0, dense=50.0, int8=400.0, bf16=200.0, dram=10.0, l3=40.0)


def small():
    """d_model 4, one decoder layer, ffn 8, vocab 10 (bench.roofline's tests count its 260 step parameters)."""
    return tiny_config(10, d_model=4, n_heads=2, decoder_layers=1, d_ff=8, pre_norm=False)


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
