"""Precision choice (`--dtype auto`) and int8 / int8-ffn loading."""

import copy
import warnings

import pytest
import torch
from torch.ao.nn.quantized import dynamic as nnqd

from app.settings import BUILTIN
from model.loading.checkpoint import load
from model.network.packed import PackedLinear, narrowest
from model.network.precision import (
    BF16_GAIN,
    INT8_FLAGS,
    Int8Linear,
    bf16_speedup,
    choose,
    cpu_flags,
    cpuinfo,
    quantize_int8,
)

VNNI = ({"avx2", "avx512f", "avx512_vnni"}, {"avx2", "avx_vnni"}, {"avx512f", "amx_bf16", "amx_int8"})


def test_auto_on_cpu_is_float32_and_names_the_int8_modes_where_they_pay():
    """auto keeps float32 on CPU (batch-invariant outputs); with VNNI/AMX its reason names int8-ffn / int8 and the
    instruction set; without, it says there are none."""
    for flags in VNNI:
        precision, why = choose("auto", "cpu", flags)
        assert precision == "float32" and "int8-ffn" in why, flags
        assert any(f in why for f in flags if "nni" in f or "amx" in f), flags
    precision, why = choose("auto", "cpu", {"avx2", "avx512f", "avx512_bf16"})
    assert precision == "float32" and "VNNI" in why
    assert choose("bfloat16", "cpu", {"avx512_bf16"}) == choose("bfloat16", "cuda", set()) == ("bfloat16", "as set")
    precision, why = choose("bfloat16", "cpu", {"avx2"})  # AMD Zen 3: 0.19-0.29x float32 from 16 rows
    assert precision == "bfloat16" and "no bf16 instructions" in why and "float32 is faster" in why
    assert isinstance(cpu_flags(), set)


def test_auto_on_cpu_takes_bfloat16_where_measured_faster():
    """With bf16 dot products, auto serves bfloat16 when the start-up measurement reaches BF16_GAIN and says so with
    the number; below it float32, the number in its reason; without bf16 instructions it never measures."""
    bf16 = {"avx2", "avx512f", "avx512_vnni", "avx512_bf16"}
    precision, why = choose("auto", "cpu", bf16, measure=lambda: BF16_GAIN + 0.2)
    assert precision == "bfloat16" and f"{BF16_GAIN + 0.2:.2f}x" in why and "avx512_bf16" in why
    precision, why = choose("auto", "cpu", bf16 | {"amx_bf16"}, measure=lambda: BF16_GAIN - 0.2)
    assert precision == "float32" and f"{BF16_GAIN - 0.2:.2f}x" in why and "int8-ffn" in why

    def never() -> float:
        raise AssertionError("measured on a CPU without bf16 instructions")

    assert choose("auto", "cpu", {"avx2", "avx512_vnni"}, measure=never)[0] == "float32"
    assert choose("float32", "cpu", bf16, measure=never) == ("float32", "as set")


def test_bf16_speedup_runs_a_decoder_layer_of_the_models_shape():
    """The measurement runs on the built-in model's shape and gives a positive ratio (its value is the machine's),
    leaving the process's random generator as it was (the core's unseeded sampling draws from it)."""
    from model.loading.checkpoint import describe

    state = torch.get_rng_state()
    assert bf16_speedup(describe(BUILTIN).config, rows=4, src_len=5, repeats=1) > 0
    assert torch.get_rng_state().equal(state)


def test_cpuinfo_reads_the_first_cpus_fields(tmp_path):
    """The first processor's block only; a missing file gives nothing (no flags: float32 everywhere)."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9B14\nflags\t: fpu avx2\n\nprocessor\t: 1\nflags\t: sse\n")
    assert cpuinfo(info)["model name"] == "AMD EPYC 9B14" and cpu_flags(info) == {"fpu", "avx2"}
    assert cpuinfo(tmp_path / "none") == {} and cpu_flags(tmp_path / "none") == set()


def test_unknown_dtype_is_refused_by_name():
    with pytest.raises(ValueError, match="dtype 'int4'"):
        choose("int4", "cpu")


@pytest.mark.parametrize("dtype", ["int8", "int8-ffn"])
def test_int8_load_keeps_the_float_size_and_is_cpu_only(native_dir, dtype):
    fp32, int8 = load(native_dir), load(native_dir, dtype=dtype)
    assert (int8.precision, int8.parameters) == (dtype, fp32.parameters)
    with pytest.raises(ValueError, match="CPU only"):
        load(native_dir, device="cuda", dtype=dtype)


def test_int8_quantizes_every_linear():
    model = load(BUILTIN, dtype="int8").model
    assert not any(isinstance(m, torch.nn.Linear) for m in model.modules())


def test_int8_ffn_quantizes_the_inner_decoder_feed_forward_layers_only():
    """6 decoder layers: the FFN linears of layers 1-4 are int8, every other linear float32, prepacked where that pays
    on this CPU."""
    model = load(BUILTIN, dtype="int8-ffn").model
    int8 = {n for n, m in model.named_modules() if isinstance(m, nnqd.Linear)}
    assert int8 == {f"decoder.{i}.ffn.{fc}" for i in range(1, 5) for fc in ("fc1", "fc2")}
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all((type(m) is PackedLinear) == (m.out_features >= narrowest()) for m in linears)


def test_int8_keeps_8_bit_activations_and_7_bit_weights_without_int8_dot_products():
    """Without VNNI/AMX the weights keep 7 bits ([-64, 63]: AVX2's int16 pair sums of u8 x s8 cannot saturate), which
    errs less than PyTorch's 7-bit activations; with them, 8-bit weights, which err less still."""
    torch.manual_seed(0)
    linear, x = torch.nn.Linear(192, 1536), torch.randn(64, 192) * torch.rand(192) * 3  # channels of unequal range
    full, avx2, default = (copy.deepcopy(linear) for _ in range(3))  # a linear keeps the qconfig it was given first
    full, avx2 = (quantize_int8(torch.nn.Sequential(m), flags=f)[0] for m, f in ((full, VNNI[0]), (avx2, {"avx2"})))
    qconfig = {torch.nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(default), qconfig, torch.qint8)[0]
    assert (type(full), type(avx2)) == (Int8Linear, Int8Linear)
    assert (avx2.weight().int_repr().min(), avx2.weight().int_repr().max()) == (-64, 63)
    assert (full.weight().int_repr().min(), full.weight().int_repr().max()) == (-128, 127)
    with torch.no_grad():
        exact = linear(x)
        assert (avx2(x) - exact).abs().mean() < 0.75 * (default(x) - exact).abs().mean()
        if cpu_flags() & set(INT8_FLAGS):  # 8-bit weights only where int32 dot products hold their sums
            assert (full(x) - exact).abs().mean() < (avx2(x) - exact).abs().mean()
