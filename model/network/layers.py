"""Building blocks: sinusoidal positions, multi-head attention, feed-forward, residual sublayers."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.network.step import Groups

ACT = {"relu": nn.ReLU, "gelu": nn.GELU, "swish": nn.SiLU}
IN_PLACE = {nn.ReLU: torch.relu_, nn.SiLU: lambda x: F.silu(x, inplace=True)}  # GELU has no in-place form


def sinusoidal_table(n_positions: int, dim: int, layout: str = "interleaved", offset: int = 0) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...); "halves" puts all sines first; "fairseq"
    (M2M100/NLLB) too, with frequencies 10000^(-i/(d/2-1)). Rows start at position `offset` (fairseq: pad + 1)."""
    pos = torch.arange(offset, offset + n_positions, dtype=torch.float64)[:, None]  # (P, 1)
    if layout == "fairseq":
        half = dim // 2
        freq = torch.exp(torch.arange(half, dtype=torch.float64) * -(math.log(10000.0) / (half - 1)))  # (d/2,)
    else:
        freq = torch.pow(10000.0, -torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (d/2,)
    angles = pos * freq  # (P, d/2)
    if layout in ("halves", "fairseq"):
        table = torch.cat([angles.sin(), angles.cos()], dim=1)
    else:
        table = torch.stack([angles.sin(), angles.cos()], dim=2).reshape(n_positions, -1)
    return table[:, :dim].float()  # (P, d)


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Reference softmax(QK^T / sqrt(d)) V with weights; mask is boolean, True = may attend."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def one_query_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """softmax(q k^T / sqrt(D) + mask) v for one query per row (q (B, H, 1, D)), or a few (a slot's beams): on CPU two
    batched GEMVs run 1.6-2x faster than the fused attention kernel at the short spans of a decode step once
    B x H >= 32 (measured)."""
    return torch.matmul(probabilities(q, k, mask), v)


def probabilities(q: Tensor, k: Tensor, mask: Tensor | None) -> Tensor:
    """softmax(q k^T / sqrt(D) + mask): q (B, H, Tq, D), k (B, H, S, D) -> (B, H, Tq, S); mask boolean or additive."""
    scores = torch.matmul(q, k.transpose(-2, -1)).mul_(q.shape[-1] ** -0.5)  # (B, H, Tq, S)
    if mask is not None:
        scores = scores.masked_fill_(~mask, float("-inf")) if mask.dtype == torch.bool else scores.add_(mask)
    return scores.softmax(-1)


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout while training; at inference `x` itself, without the module call and the no-op kernel dispatch that
    nn.Dropout still costs in eval mode (13 per decode step; about 8 us each on a small CPU at batch 1)."""
    return F.dropout(x, p, True) if training and p > 0 else x


def unpack(x: Tensor, rows: Tensor, shape: tuple[int, int]) -> Tensor:
    """Real tokens x (T, d) at flat positions `rows` of a (B, S) batch -> (B, S, d), zeros at padding."""
    b, s = shape
    return x.new_zeros(b * s, x.shape[-1]).index_copy_(0, rows, x).view(b, s, -1)


@dataclass
class Chunk:
    """Rows of a padded batch whose self-attention runs together: their tokens start:end of the packed (T, d) layout,
    at flat positions `rows` of their own (b, S_c) layout, S_c their longest; mask (b, 1, 1, S_c)."""

    start: int
    end: int
    rows: Tensor
    mask: Tensor


def attention_chunks(mask: Tensor, split: bool) -> tuple[Tensor, list[Chunk]]:
    """The real tokens of a padded batch (mask (B, S), True = real) as flat positions (T,) and the chunks their
    attention runs in: one, or with `split` the rows longest first, in chunks of similar lengths (no chunk's shortest
    under half its longest). Attention over one padded (B, S) layout costs B x S^2: 64 sources of 3 to 122 tokens paid
    4.3x the chunks' attention time (1 thread, AVX2 EPYC)."""
    if not split:
        rows = mask.flatten().nonzero()[:, 0]  # (T,)
        return rows, [Chunk(0, rows.numel(), rows, mask[:, None, None, :])]
    b, s = mask.shape
    ends = torch.where(mask, torch.arange(1, s + 1, device=mask.device), 0).amax(1)  # (B,) last real position + 1
    order = ends.argsort(descending=True, stable=True)  # (B,)
    sorted_mask = mask[order]
    rows = (order[:, None] * s + torch.arange(s, device=mask.device)).flatten()[sorted_mask.flatten()]  # (T,)
    widths, counts = ends[order].tolist(), sorted_mask.sum(1).tolist()
    chunks, first, start = [], 0, 0
    for i in range(1, b + 1):
        if i == b or 2 * widths[i] < widths[first]:
            part = sorted_mask[first:i, : widths[first]]  # (b, S_c)
            end = start + sum(counts[first:i])
            chunks.append(Chunk(start, end, part.flatten().nonzero()[:, 0], part[:, None, None, :]))
            first, start = i, end
    return rows, chunks


def additive_mask(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """Boolean mask (True = may attend) as 0 / -inf in `dtype`: attention kernels add it without converting."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def causal_mask(t: int, device: torch.device | None = None) -> Tensor:
    """(t, t) boolean mask, True on and below the diagonal."""
    return torch.ones(t, t, dtype=torch.bool, device=device).tril()


def head_mean(probs: Tensor, heads: tuple[int, ...]) -> Tensor:
    """Attention probabilities (B, H, Tq, S) averaged over `heads` -> (B, Tq, S)."""
    return probs.mean(1) if len(heads) == probs.shape[1] else sum(probs[:, h] for h in heads) / len(heads)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate Q/K/V projections so K/V can be projected once and cached."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0):
        super().__init__()
        self.n_heads = n_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split(self, x: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, H, T, D)."""
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, -1).transpose(1, 2)

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of `x`, each (B, H, T, D)."""
        return self.split(self.k_proj(x)), self.split(self.v_proj(x))

    def forward(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, groups: Groups | None = None) -> Tensor:
        """Queries from x (B, Tq, d_model) over k/v (B, H, Tk, D); mask broadcasts to (B, H, Tq, Tk). With `groups`
        (a decode step, Tq = 1), k/v and mask are per slot (G, ...) and each row's query goes to its slot's."""
        q = self.split(self.q_proj(x))  # (B, H, Tq, D)
        b, h, t, _ = q.shape
        if groups is not None:
            outs = [self.attend(*p, True) for p in groups.parts(q, k, v, mask)]  # (G, H, W, D) each
            return self.out_proj(groups.rows(*outs))  # (B, 1, d_model)
        return self.out_proj(self.attend(q, k, v, mask, t == 1).transpose(1, 2).reshape(b, t, -1))

    def aligned(
        self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor, groups: Groups | None, heads: tuple[int, ...]
    ) -> tuple[Tensor, Tensor]:
        """A decode step's `forward` (n, 1, d_model) and its attention distributions over the keys averaged over
        `heads` (n, S): k/v (G, H, S, D) and the additive mask (G, 1, 1, S) per slot, read through `groups`."""
        q = self.split(self.q_proj(x))  # (n, H, 1, D)
        n, h, _, d = q.shape
        if groups is None:
            out, mean = self.with_mean(q, k, v, mask, heads)
            return self.out_proj(out.transpose(1, 2).reshape(n, 1, h * d)), mean[:, 0]
        got = [self.with_mean(*p, heads) for p in groups.parts(q, k, v, mask)]  # (G, H, W, D), (G, W, S) each
        outs, means = zip(*got, strict=True)
        return self.out_proj(groups.rows(*outs)), groups.rows(*(m[:, None] for m in means))[:, 0]

    def with_mean(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, heads: tuple[int, ...]) -> tuple[Tensor, Tensor]:
        """`attend` of a step's queries (B, H, W, D) (or a teacher-forced pass's) and the distributions averaged over
        `heads` (B, W, S): one q k^T for both where the attention is two GEMVs (the same numbers)."""
        if self.gemv(q, True):
            probs = probabilities(q, k, mask)  # (B, H, W, S)
            return torch.matmul(probs, v), head_mean(probs, heads)
        return self.attend(q, k, v, mask, True), head_mean(probabilities(q, k, mask), heads)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, step: bool) -> Tensor:
        """softmax(q k^T / sqrt(D) + mask) v: q (B, H, Tq, D) -> (B, H, Tq, D); `step`: a decode step's queries."""
        if self.gemv(q, step):
            return one_query_attention(q, k, v, mask)  # a decode step on CPU (a few queries per slot with beams)
        p = self.dropout if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)

    def gemv(self, q: Tensor, step: bool) -> bool:
        """Whether attention over queries q (B, H, Tq, D) runs as two batched GEMVs (`one_query_attention`)."""
        b, h = q.shape[:2]
        return step and b * h >= 32 and q.device.type == "cpu" and q.dtype == torch.float32 and not self.training


class FeedForward(nn.Module):
    """Position-wise Linear -> activation -> Linear."""

    def __init__(self, d_model: int, d_ff: int, activation: str, dropout: float = 0.0):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.act = ACT[activation]()
        self.dropout = dropout
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, T, d_model)."""
        h = self.fc1(x)  # (B, T, d_ff)
        plain = self.training or torch.is_grad_enabled()
        act = self.act if plain else IN_PLACE.get(type(self.act), self.act)  # in place: no new buffer to fault in
        return self.fc2(dropout(act(h), self.dropout, self.training))


class Residual(nn.Module):
    """x + f(x) with LayerNorm before f (pre-LN) or after the sum (post-LN)."""

    def __init__(self, d_model: int, pre_norm: bool, eps: float, dropout: float):
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.pre_norm = pre_norm
        self.dropout = dropout

    def forward(self, x: Tensor, f: Callable[[Tensor], Tensor]) -> Tensor:
        """Apply the sublayer `f` with its residual connection and norm."""
        if self.pre_norm:
            return x + dropout(f(self.norm(x)), self.dropout, self.training)
        return self.norm(x + dropout(f(x), self.dropout, self.training))
