"""Precision choice (`--dtype auto`) and int8 loading."""

import pytest
import torch

from model.checkpoint import load
from model.precision import choose, cpu_flags


def test_auto_on_cpu_is_float32_and_names_int8_where_it_would_be_faster():
    """auto keeps float32 on CPU (int8 changes too many greedy outputs); its reason says where int8 would pay."""
    for flags in ({"avx2", "avx512f", "avx512_vnni"}, {"avx2", "avx_vnni"}, {"avx512f", "amx_bf16", "amx_int8"}):
        precision, why = choose("auto", "cpu", flags)
        assert precision == "float32" and "--dtype int8" in why, flags
    precision, why = choose("auto", "cpu", {"avx2", "avx512f", "avx512_bf16"})
    assert precision == "float32" and "VNNI" in why
    assert choose("bfloat16", "cpu", set()) == ("bfloat16", "as set")
    assert isinstance(cpu_flags(), set)


def test_unknown_dtype_is_refused_by_name():
    with pytest.raises(ValueError, match="dtype 'int4'"):
        choose("int4", "cpu")


def test_int8_load_quantizes_every_linear_and_keeps_the_float_size(native_dir):
    fp32, int8 = load(native_dir), load(native_dir, dtype="int8")
    assert (int8.precision, int8.parameters) == ("int8", fp32.parameters)
    assert not any(type(m) is torch.nn.Linear for m in int8.model.modules())
    with pytest.raises(ValueError, match="CPU only"):
        load(native_dir, device="cuda", dtype="int8")
