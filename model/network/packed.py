"""Linear layers with a prepacked oneDNN weight for CPU inference: on this project's shapes oneDNN's packed GEMM runs
2-2.7x faster than the default (MKL) F.linear at 16 rows and more, and on large outputs (the vocabulary) at any
row count; at one row too, inside a model whose weights stream from memory (MKL's GEMV runs them on one thread and
wins only on a weight the cache already holds): one text greedy on 2 AVX-512 threads, OPUS-MT's shape 11.6 -> 7.4
ms a token, NLLB-600M's 64 -> 45, beam 4 on OPUS-MT 13.1 -> 9.5, the built-in model 2.8 -> 2.2. The ops are
PyTorch's own (`torch.ops.mkldnn._reorder_linear_weight` / `_linear_pointwise`, what `torch.compile` with freezing
emits on CPU)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

AVX2_FROM = 4096  # out_features from which it wins on a CPU with AVX2 but no AVX-512 (the vocabulary projection)


def available() -> bool:
    """oneDNN (mkldnn) is built into this torch."""
    return torch.backends.mkldnn.is_available()


class PackedLinear(nn.Linear):
    """nn.Linear (same weight and bias parameters, so state_dict and tied weights are unchanged) that also holds the
    weight prepacked for oneDNN, repacked if the weight changed in place; float32 CPU inputs only use it."""

    @classmethod
    def of(cls, linear: nn.Linear) -> PackedLinear:
        """A packed twin sharing `linear`'s parameters."""
        packed = cls.__new__(cls)
        nn.Module.__init__(packed)
        packed.in_features, packed.out_features = linear.in_features, linear.out_features
        packed.weight, packed.bias = linear.weight, linear.bias
        packed._pack()
        return packed

    def _pack(self) -> None:
        """Reorder the weight into oneDNN's blocked layout (a copy)."""
        self._packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach())
        self._version = _version(self.weight)

    def __getstate__(self) -> dict:
        """Copies and pickles leave the packed weight out (oneDNN's opaque tensor has no storage to copy): repacked
        at the copy's first float32 CPU call."""
        return {**self.__dict__, "_packed": None, "_version": None}

    def forward(self, x: Tensor) -> Tensor:
        """x (..., in) -> (..., out): packed GEMM for float32 CPU inputs, else F.linear."""
        if x.dtype != torch.float32 or x.device.type != "cpu":
            return F.linear(x, self.weight, self.bias)
        if _version(self.weight) != self._version or self.weight.dtype != torch.float32:
            if self.weight.dtype != torch.float32 or self.weight.device.type != "cpu":
                return F.linear(x, self.weight, self.bias)
            self._pack()
        return torch.ops.mkldnn._linear_pointwise(x, self._packed, self.bias, "none", [], "")


def _version(weight: Tensor) -> int:
    """The weight's in-place modification counter (inference tensors, which have none, count as unchanged)."""
    return -1 if weight.is_inference() else weight._version


def narrowest() -> int:
    """The fewest out_features a linear needs for packing to pay on this CPU: any with AVX-512 (the rows decide at
    each call); with AVX2 alone, vocabulary-sized outputs only: there (AMD Zen 3, 1 thread) MKL's F.linear runs the
    256- to 1,024-wide layers 1.05-3x faster at every row count, the packed GEMM 256 x 8,000 1.0-2.5x faster."""
    return AVX2_FROM if torch.backends.cpu.get_cpu_capability() == "AVX2" else 0


def pack_linears(model: nn.Module, min_out: int | None = None) -> nn.Module:
    """Swap every nn.Linear of a float32 CPU model with at least `min_out` outputs (default: `narrowest()`) for its
    PackedLinear twin, in place (a no-op without oneDNN)."""
    if not available():
        return model
    min_out = narrowest() if min_out is None else min_out
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if (
                type(child) is nn.Linear
                and child.weight.dtype == torch.float32
                and child.weight.device.type == "cpu"
                and child.out_features >= min_out
            ):
                setattr(parent, name, PackedLinear.of(child))
    return model
