"""Precision choice (`--dtype auto`) and int8 / int8-ffn loading."""

import pytest
import torch
from torch.ao.nn.quantized import dynamic as nnqd

from app.settings import BUILTIN
from model.checkpoint import load
from model.packed import PackedLinear
from model.precision import INT8_FLAGS, Int8Linear, choose, cpu_flags, quantize_int8

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
    assert choose("bfloat16", "cpu", set()) == ("bfloat16", "as set")
    assert isinstance(cpu_flags(), set)


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
    """6 decoder layers: the FFN linears of layers 1-4 are int8, every other linear float32 and prepacked."""
    model = load(BUILTIN, dtype="int8-ffn").model
    int8 = {n for n, m in model.named_modules() if isinstance(m, nnqd.Linear)}
    assert int8 == {f"decoder.{i}.ffn.{fc}" for i in range(1, 5) for fc in ("fc1", "fc2")}
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(type(m) is PackedLinear for m in linears)


def test_int8_activations_use_8_bits_only_with_int8_dot_products():
    """Int8Linear (8-bit activations) where the CPU has VNNI/AMX, PyTorch's 7-bit default elsewhere; on such a CPU
    8 bits err less."""
    torch.manual_seed(0)
    linear, x = torch.nn.Linear(192, 1536), torch.randn(64, 192)
    full, reduced = (quantize_int8(torch.nn.Sequential(linear), flags=f)[0] for f in (VNNI[0], {"avx2"}))
    assert (type(full), type(reduced)) == (Int8Linear, nnqd.Linear)
    if not cpu_flags() & set(INT8_FLAGS):
        return  # without int32 dot products, 8-bit activations may saturate: never chosen there
    with torch.no_grad():
        exact = linear(x)
        assert (full(x) - exact).abs().mean() < (reduced(x) - exact).abs().mean()
