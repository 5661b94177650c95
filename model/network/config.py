"""Architecture of an encoder-decoder Transformer as a frozen dataclass."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

ACTIVATIONS = ("relu", "gelu", "swish")
PE_LAYOUTS = ("interleaved", "halves", "fairseq", "learned")


@dataclass(frozen=True)
class ModelConfig:
    """Everything that fixes the network's shape and numerics (not the service knobs)."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    encoder_layers: int = 6
    decoder_layers: int = 6
    d_ff: int = 2048
    activation: str = "relu"
    pre_norm: bool = False
    scale_embedding: bool = False
    share_embeddings: bool = False
    tie_output: bool = True
    final_logits_bias: bool = False
    max_positions: int = 1024
    pe_layout: str = "interleaved"  # sinusoidal (interleaved, halves, fairseq) or learned tables
    pe_offset: int = 0  # the sinusoidal table starts at this position (fairseq: pad_id + 1)
    embed_norm: bool = False  # LayerNorm after embedding + position (mBART's layernorm_embedding)
    dropout: float = 0.1  # on embeddings and each sublayer's output (training only, as all three)
    attention_dropout: float = 0.0  # on the attention weights (Hugging Face's and fairseq's name and default)
    activation_dropout: float = 0.0  # inside the feed-forward, after the activation: its (B, T, d_ff) mask is a
    # training step's largest random draw (a sixth of a CPU step's time at d_ff = 8 x d_model)
    layer_norm_eps: float = 1e-5
    pad_id: int = 0
    eos_id: int = 1
    unk_id: int = 2
    decoder_start_id: int = 0
    align_layer: int = -1  # the decoder layer whose cross-attention aligns best (-1: `alignment`'s default)
    align_heads: tuple[int, ...] = ()  # its heads that align (empty: all of them, averaged)

    def __post_init__(self) -> None:
        object.__setattr__(self, "align_heads", tuple(self.align_heads))  # a JSON list, hashable as a tuple
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation={self.activation!r}; expected one of {ACTIVATIONS}")
        if self.pe_layout not in PE_LAYOUTS:
            raise ValueError(f"pe_layout={self.pe_layout!r}; expected one of {PE_LAYOUTS}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("share_embeddings needs src_vocab_size == tgt_vocab_size")

    @property
    def head_dim(self) -> int:
        """Size of one attention head."""
        return self.d_model // self.n_heads

    @property
    def alignment(self) -> tuple[int, tuple[int, ...]]:
        """(layer, heads) whose cross-attention is read as the decoder's alignment to the source: the configured
        ones, else the second decoder layer's heads averaged (measured best on the built-in model; a guided-alignment
        Marian checkpoint names its last layer's first head)."""
        layer = self.align_layer if self.align_layer >= 0 else min(1, self.decoder_layers - 1)
        return layer, self.align_heads or tuple(range(self.n_heads))

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for config.json."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Build from a dict, rejecting unknown keys by name."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown config keys: {unknown}")
        return cls(**data)
