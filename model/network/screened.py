"""The vocabulary projection of a float32 model on a CPU with bf16 dot products, screened: a bf16 GEMM (half the
bytes of the largest weight a decode step reads: NLLB's 256,206 x 1,024) gives every logit within a known bound, the
best of each row (SCREEN at a few rows, fewer at many: the gather of their weight rows outgrows the GEMM) are
computed again in float32 from the float32 weight, a row whose CERTIFIED best float32 logits do not clear every
other logit's bound gets SCREEN, and one that still does not is computed whole in float32. The tokens a search
picks among a row's CERTIFIED best are float32's; the rest of the row (the log-softmax's normaliser, tokens a
processor reaches after banning the best) keeps bf16's values, within the bound."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.network.packed import PackedLinear, _version, available

SCREEN = 256  # logits computed again in float32 per row, at most
MIN_SCREEN = 32  # ... at least (a row whose best are not clear of the bound then gets SCREEN)
GATHERED = 2048  # float32 weight rows gathered per call, about (64 rows: 32 each; the gather outgrows the GEMM)
CERTIFIED = 8  # a row's best float32 logits that must clear the bound (beam 4 takes 2 x 4 candidates a row)
MIN_VOCAB = 32_768  # from this many outputs the screen pays (OPUS-MT's 58k, NLLB's 256k; the built-in 8k: no)
ERROR = 2.0**-8 * 1.01  # |bf16 logit - float32 logit| <= ERROR * |w_i| |x| (round to nearest: 2^-9 each, fp32 sums)


class ScreenedLinear(PackedLinear):
    """PackedLinear's parameters (state_dict, tied embedding unchanged) with a bf16 prepacked copy instead of the
    float32 one: screened logits (above) for 2-D float32 CPU inputs, F.linear for any other."""

    def _pack(self) -> None:
        """The bf16 weight in oneDNN's blocked layout and the largest row norm (the bound's |w_i|)."""
        weight = self.weight.detach()
        self._packed = torch.ops.mkldnn._reorder_linear_weight(weight.bfloat16())
        self._norm = float(weight.norm(dim=1).max())
        self._version = _version(self.weight)

    def forward(self, x: Tensor, bias: Tensor | None = None) -> Tensor:
        """x (..., in) -> (..., out) logits, plus `bias` (out,) (a model's final logits bias) before the screen."""
        bias = self.bias if bias is None else bias if self.bias is None else bias + self.bias
        if x.dtype != torch.float32 or x.device.type != "cpu" or self.weight.dtype != torch.float32:
            return F.linear(x, self.weight, bias)
        if self._packed is None or _version(self.weight) != self._version:
            self._pack()
        rows = x.reshape(-1, x.shape[-1])  # (N, in)
        logits = torch.ops.mkldnn._linear_pointwise(rows.bfloat16(), self._packed, None, "none", [], "").float()
        if bias is not None:
            logits += bias  # (N, V)
        bound = ERROR * self._norm * rows.norm(dim=1)  # (N,)
        widest = min(SCREEN, logits.shape[1])
        k = min(max(MIN_SCREEN, GATHERED // rows.shape[0]), widest)  # fewer a row at many rows
        at = (~self._rescore(logits, rows, k, bias, bound)).nonzero()[:, 0]  # rows the screen cannot vouch for
        if len(at) and k < widest:  # near ties: a wider screen for them
            part = logits.index_select(0, at)
            vouched = self._rescore(part, rows.index_select(0, at), widest, bias, bound[at])
            logits.index_copy_(0, at, part)
            at = at[~vouched]
        if len(at):  # near ties down the widest screen: those rows whole in float32
            logits.index_copy_(0, at, F.linear(rows.index_select(0, at), self.weight, bias))
        return logits.view(*x.shape[:-1], -1)

    def _rescore(self, logits: Tensor, x: Tensor, k: int, bias: Tensor | None, bound: Tensor) -> Tensor:
        """`logits` (R, V) of the inputs `x` (R, in) with their k best computed again in float32, in place; whether
        each row's CERTIFIED best float32 logits clear every other logit's `bound` (R,) above its value (R,)."""
        top = logits.topk(k, dim=1)  # (R, k) each
        exact = torch.bmm(self.weight[top.indices], x[:, :, None])[..., 0]  # (R, k) float32
        if bias is not None:
            exact += bias[top.indices]
        logits.scatter_(1, top.indices, exact)
        return exact.topk(min(CERTIFIED, k), dim=1).values[:, -1] > top.values[:, -1] + bound


def screen_projection(model: nn.Module) -> bool:
    """Swap a float32 CPU model's vocabulary projection (`out_proj`) of MIN_VOCAB outputs or more for its screened
    twin (the caller knows the CPU has bf16 dot products); whether it did."""
    proj = getattr(model, "out_proj", None)
    fits = isinstance(proj, nn.Linear) and proj.weight.dtype == torch.float32 and proj.weight.device.type == "cpu"
    if not (fits and available() and proj.out_features >= MIN_VOCAB):
        return False
    model.out_proj = ScreenedLinear.of(proj)
    return True


def screened(model: nn.Module) -> bool:
    """Whether the model's vocabulary projection is screened."""
    return isinstance(getattr(model, "out_proj", None), ScreenedLinear)
