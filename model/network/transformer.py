"""The encoder-decoder Transformer: encode once, then decode step by step over an explicit cache."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.network.config import ModelConfig
from model.network.layers import (
    Chunk,
    FeedForward,
    MultiHeadAttention,
    Residual,
    additive_mask,
    attention_chunks,
    causal_mask,
    dropout,
    head_mean,
    probabilities,
    sinusoidal_table,
    unpack,
)
from model.network.screened import ScreenedLinear
from model.network.step import StepInputs

Alignment = tuple[int, tuple[int, ...]]  # a decoder layer and its heads whose cross-attention aligns


class EncoderLayer(nn.Module):
    """Self-attention and feed-forward, each in a residual sublayer."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.activation_dropout)
        self.attn_block = Residual(cfg.d_model, cfg.pre_norm, cfg.layer_norm_eps, cfg.dropout)
        self.ffn_block = Residual(cfg.d_model, cfg.pre_norm, cfg.layer_norm_eps, cfg.dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x (B, S, d_model), mask (B, 1, 1, S)."""
        x = self.attn_block(x, lambda h: self.self_attn(h, *self.self_attn.project_kv(h), mask))
        return self.ffn_block(x, self.ffn)

    def packed(self, x: Tensor, chunks: list[Chunk]) -> Tensor:
        """x (T, d_model): only the real tokens of a padded batch, in `chunks` of rows; the linear layers skip the
        padding, and attention sees each chunk's own padded (b, S_c) layout."""
        attn = self.self_attn

        def attend(h: Tensor) -> Tensor:
            q, k, v = (proj(h) for proj in (attn.q_proj, attn.k_proj, attn.v_proj))  # (T, d_model)
            out = torch.empty_like(q)
            for c in chunks:
                shape = (c.mask.shape[0], c.mask.shape[-1])
                qc, kc, vc = (attn.split(unpack(t[c.start : c.end], c.rows, shape)) for t in (q, k, v))
                o = F.scaled_dot_product_attention(qc, kc, vc, attn_mask=c.mask)  # (b, H, S_c, D)
                out[c.start : c.end] = o.transpose(1, 2).flatten(2).flatten(0, 1)[c.rows]
            return attn.out_proj(out)  # (T, d_model)

        x = self.attn_block(x, attend)
        return self.ffn_block(x, self.ffn)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder memory, feed-forward."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.activation_dropout)
        blocks = [Residual(cfg.d_model, cfg.pre_norm, cfg.layer_norm_eps, cfg.dropout) for _ in range(3)]
        self.self_block, self.cross_block, self.ffn_block = blocks

    def forward(self, x: Tensor, self_mask: Tensor, cross_kv: tuple[Tensor, Tensor], src_mask: Tensor) -> Tensor:
        """Teacher-forced: x (B, T, d_model), self_mask (1, 1, T, T), src_mask (B, 1, 1, S)."""
        x = self.self_block(x, lambda h: self.self_attn(h, *self.self_attn.project_kv(h), self_mask))
        x = self.cross_block(x, lambda h: self.cross_attn(h, *cross_kv, src_mask))
        return self.ffn_block(x, self.ffn)

    def step(
        self, x: Tensor, inputs: StepInputs, layer: int, self_bias: Tensor | None, src_bias: Tensor, heads=None
    ) -> tuple[Tensor, Tensor | None]:
        """One new position per row: x (N, 1, d_model); writes this layer's K/V into the step's buffers. The additive
        masks are the step's, shared by all layers: self_bias (N, 1, 1, t) or None, src_bias (G, 1, 1, S) per slot.
        With `heads`, also their cross-attention over the source, averaged (N, S)."""
        aligned = None

        def self_attend(h: Tensor) -> Tensor:
            k, v = self.self_attn.project_kv(h)  # (N, H, 1, D)
            keys, values = inputs.write(layer, k[:, :, 0], v[:, :, 0])  # (N, H, t, D)
            return self.self_attn(h, keys, values, self_bias)

        def cross_attend(h: Tensor) -> Tensor:
            nonlocal aligned
            if heads is None:
                return self.cross_attn(h, *cross, src_bias, inputs.groups)
            out, aligned = self.cross_attn.aligned(h, *cross, src_bias, inputs.groups, heads)
            return out

        x = self.self_block(x, self_attend)
        cross = inputs.cross(layer)  # per slot; inputs.groups: how rows find theirs (None: row i reads slot i)
        x = self.cross_block(x, cross_attend)
        return self.ffn_block(x, self.ffn), aligned


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder Transformer; the model knows token ids only, never text."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tgt_embed = nn.Embedding(cfg.tgt_vocab_size, cfg.d_model)
        self.src_embed = self.tgt_embed if cfg.share_embeddings else nn.Embedding(cfg.src_vocab_size, cfg.d_model)
        if cfg.pe_layout == "learned":  # one table each side (mBART)
            self.src_pos, self.tgt_pos = (nn.Embedding(cfg.max_positions, cfg.d_model) for _ in range(2))
        else:
            table = sinusoidal_table(cfg.max_positions, cfg.d_model, cfg.pe_layout, cfg.pe_offset)
            self.register_buffer("pe", table, persistent=False)
        norm = lambda: nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps) if cfg.embed_norm else nn.Identity()
        self.src_embed_norm, self.tgt_embed_norm = norm(), norm()
        self.embed_scale = math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        self.encoder_norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps) if cfg.pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps) if cfg.pre_norm else nn.Identity()
        self.out_proj = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, bias=False)
        if cfg.tie_output:
            self.out_proj.weight = self.tgt_embed.weight
        if cfg.final_logits_bias:
            self.register_buffer("final_logits_bias", torch.zeros(cfg.tgt_vocab_size))
        else:
            self.final_logits_bias = None

    def init_weights(self) -> Seq2SeqTransformer:
        """Training init: embeddings N(0, d^-1/2) (they are scaled by sqrt(d) and tied), Xavier linears."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        for table in {self.src_embed, self.tgt_embed}:
            nn.init.normal_(table.weight, 0.0, self.cfg.d_model**-0.5)
            with torch.no_grad():
                table.weight[self.cfg.pad_id].zero_()
        return self

    @property
    def device(self) -> torch.device:
        """Where the weights are."""
        return self.tgt_embed.weight.device

    def _embed(self, side: str, ids: Tensor, positions: Tensor) -> Tensor:
        """Scaled token embedding plus position ("src" or "tgt" side), optional norm, then dropout."""
        table, norm = (self.src_embed, self.src_embed_norm) if side == "src" else (self.tgt_embed, self.tgt_embed_norm)
        pos_table = getattr(self, f"{side}_pos").weight if self.cfg.pe_layout == "learned" else self.pe
        x = norm(table(ids) * self.embed_scale + F.embedding(positions, pos_table))
        return dropout(x, self.cfg.dropout, self.training)

    def _logits(self, x: Tensor) -> Tensor:
        """Final norm (pre-LN) and projection to the target vocabulary."""
        x = self.decoder_norm(x)
        if type(self.out_proj) is nn.Linear:  # bias fused into the GEMM (quantized modules keep the slow path)
            return F.linear(x, self.out_proj.weight, self.final_logits_bias)
        if isinstance(self.out_proj, ScreenedLinear):  # the bias counts in the screen
            return self.out_proj(x, self.final_logits_bias)
        logits = self.out_proj(x)
        return logits if self.final_logits_bias is None else logits + self.final_logits_bias

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """src (B, S) ids, src_mask (B, S) bool -> memory (B, S, d_model)."""
        x = self._embed("src", src, torch.arange(src.shape[1], device=src.device))
        mask = src_mask[:, None, None, :]  # (B, 1, 1, S)
        if self.training or bool(src_mask.all()):
            for layer in self.encoder:
                x = layer(x, mask)
            return self.encoder_norm(x)
        rows, chunks = attention_chunks(src_mask, split=src.device.type == "cpu")  # inference skips the padding
        x = x.flatten(0, 1)[rows]  # (T, d_model)
        for layer in self.encoder:
            x = layer.packed(x, chunks)
        return unpack(self.encoder_norm(x), rows, src_mask.shape)

    def cross_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Every decoder layer's cross-attention K/V, projected once: each (L, B, H, S, D)."""
        kv = [layer.cross_attn.project_kv(memory) for layer in self.decoder]
        return torch.stack([k for k, _ in kv]), torch.stack([v for _, v in kv])

    def step_logits(self, inputs: StepInputs) -> Tensor:
        """The device work of one decode step: logits (n, V) for the step's rows, their new K/V written into its
        buffers. It reads and changes no host state, so a CUDA graph can capture it."""
        return self.step(inputs)[0]

    def step(self, inputs: StepInputs, align: Alignment | None = None) -> tuple[Tensor, Tensor | None]:
        """`step_logits`, and with `align` (layer, heads) that layer's cross-attention over each row's source, averaged
        over the heads (n, S): where the decoder looks while it predicts the next token."""
        x = self._embed("tgt", inputs.tokens, inputs.positions)[:, None]  # (n, 1, d_model)
        visible = inputs.self_visible()  # (n, 1, 1, t) bool, or None when every row sees every position
        self_bias = None if visible is None else additive_mask(visible, x.dtype)
        src_bias = additive_mask(inputs.src_mask, x.dtype)[:, None, None, :]  # (g, 1, 1, S) per slot
        aligned = None
        for i, layer in enumerate(self.decoder):
            heads = align[1] if align is not None and align[0] == i else None
            x, weights = layer.step(x, inputs, i, self_bias, src_bias, heads)
            aligned = weights if weights is not None else aligned
        return self._logits(x[:, 0]), aligned

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor) -> Tensor:
        """Teacher-forced decoder over the whole prefix: tgt_in (B, T) -> logits (B, T, V)."""
        t = tgt_in.shape[1]
        x = self._embed("tgt", tgt_in, torch.arange(t, device=tgt_in.device))
        self_mask = causal_mask(t, tgt_in.device)[None, None]  # (1, 1, T, T)
        smask = src_mask[:, None, None, :]
        for layer in self.decoder:
            x = layer(x, self_mask, layer.cross_attn.project_kv(memory), smask)
        return self._logits(x)

    def prefill(
        self, tgt_in: Tensor, cross: tuple[Tensor, Tensor], src_mask: Tensor, align: Alignment | None = None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """Teacher-forced over forced prefixes tgt_in (B, T), on cross-attention K/V projected already (each
        (L, B, H, S, D)): every layer's self-attention K/V (each (L, B, H, T, D)), as decode steps would write them,
        the logits (B, T, V) and, with `align`, that layer's cross-attention averaged over its heads (B, T, S)."""
        t = tgt_in.shape[1]
        x = self._embed("tgt", tgt_in, torch.arange(t, device=tgt_in.device))
        self_mask = causal_mask(t, tgt_in.device)[None, None]  # (1, 1, T, T)
        src_bias = additive_mask(src_mask, x.dtype)[:, None, None, :]  # (B, 1, 1, S)
        keys, values, aligned = [], [], None
        for i, layer in enumerate(self.decoder):

            def self_attend(h: Tensor, attn: MultiHeadAttention = layer.self_attn) -> Tensor:
                k, v = attn.project_kv(h)  # (B, H, T, D)
                keys.append(k)
                values.append(v)
                return attn(h, k, v, self_mask)

            def cross_attend(h: Tensor, attn: MultiHeadAttention = layer.cross_attn, i: int = i) -> Tensor:
                nonlocal aligned
                k, v = cross[0][i], cross[1][i]  # (B, H, S, D)
                if align is None or align[0] != i:
                    return attn(h, k, v, src_bias)
                out, aligned = attn.with_mean(attn.split(attn.q_proj(h)), k, v, src_bias, align[1])  # (B, H, T, D)
                return attn.out_proj(out.transpose(1, 2).reshape(h.shape[0], t, -1))

            x = layer.self_block(x, self_attend)
            x = layer.cross_block(x, cross_attend)
            x = layer.ffn_block(x, layer.ffn)
        return torch.stack(keys), torch.stack(values), self._logits(x), aligned

    def cross_attention(self, memory: Tensor, src_mask: Tensor, tgt_in: Tensor, align: Alignment) -> Tensor:
        """Teacher-forced: the cross-attention of `align`'s layer (its heads averaged) at every target position over
        the source, (B, T, S): row t is where the decoder looks while it predicts the token after tgt_in[:, t]."""
        layer_at, heads = align
        t = tgt_in.shape[1]
        x = self._embed("tgt", tgt_in, torch.arange(t, device=tgt_in.device))
        self_mask = causal_mask(t, tgt_in.device)[None, None]  # (1, 1, T, T)
        src_bias = additive_mask(src_mask, x.dtype)[:, None, None, :]  # (B, 1, 1, S)
        for i, layer in enumerate(self.decoder[: layer_at + 1]):
            attn = layer.self_attn
            x = layer.self_block(x, lambda h, attn=attn: attn(h, *attn.project_kv(h), self_mask))
            k, v = layer.cross_attn.project_kv(memory)  # (B, H, S, D)
            if i == layer_at:
                h = layer.cross_block.norm(x) if self.cfg.pre_norm else x
                q = layer.cross_attn.split(layer.cross_attn.q_proj(h))  # (B, H, T, D)
                return head_mean(probabilities(q, k, src_bias), heads)  # (B, T, S)
            x = layer.cross_block(x, lambda h, layer=layer, k=k, v=v: layer.cross_attn(h, k, v, src_bias))
            x = layer.ffn_block(x, layer.ffn)
        raise ValueError(f"alignment layer {layer_at} of a {len(self.decoder)}-layer decoder")

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        """Training forward (teacher forcing): logits (B, T, V)."""
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask)
