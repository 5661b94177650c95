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


def test_a_packed_model_copies_pickles_and_moves_to_another_dtype():
    """A deep copy (what moving a shared test model to another device or dtype starts from) and a pickle of a packed
    model give its outputs again, and the copy in bfloat16 still runs."""
    import copy
    import io

    torch.manual_seed(0)
    model, x = pack_linears(nn.Sequential(nn.Linear(16, 64), nn.Linear(64, 32)), min_out=0), torch.randn(4, 16)
    with torch.no_grad():
        want = model(x)
        twin = copy.deepcopy(model)
        buf = io.BytesIO()
        torch.save(model, buf)
        buf.seek(0)
        loaded = torch.load(buf, weights_only=False)
        for other in (twin, loaded):
            assert type(other[1]) is PackedLinear
            torch.testing.assert_close(other(x), want, rtol=0, atol=0)
        assert copy.deepcopy(model).to(torch.bfloat16)(x.bfloat16()).shape == (4, 32)
