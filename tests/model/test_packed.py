"""oneDNN-prepacked linears: which layers are packed, and that packing changes no output beyond float rounding."""

import pytest
import torch
from torch import nn

from model.network.packed import PackedLinear, available, pack_linears

pytestmark = pytest.mark.skipif(not available(), reason="needs oneDNN (mkldnn) in torch")


def test_packs_the_linears_at_least_min_out_wide_and_keeps_their_outputs():
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(16, 64), nn.Linear(64, 5000)), torch.randn(32, 16)
    with torch.no_grad():
        want = model(x)
        pack_linears(model, min_out=4096)
        assert [type(m) for m in model] == [nn.Linear, PackedLinear]
        torch.testing.assert_close(model(x), want)
        pack_linears(model, min_out=0)
        assert [type(m) for m in model] == [PackedLinear, PackedLinear]
        torch.testing.assert_close(model(x), want)
