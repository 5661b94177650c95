"""A served model as the HTTP fronts see it: everything but the weights (which stay in the engine core)."""

from __future__ import annotations

from dataclasses import dataclass

from model.config import ModelConfig
from model.tokenizer import Tokenizer


@dataclass
class ModelCard:
    """Names, languages, tokenizer, architecture and size of a model; the core sends it pickled in Ready."""

    name: str
    source_lang: str
    target_lang: str
    path: str
    tokenizer: Tokenizer
    config: ModelConfig
    parameters: int
    dtype: str
    device: str

    @classmethod
    def of(cls, checkpoint) -> ModelCard:
        """The card of a loaded model.checkpoint.Checkpoint."""
        m = checkpoint.model
        p = next(m.parameters())
        return cls(
            checkpoint.name,
            checkpoint.source_lang,
            checkpoint.target_lang,
            str(checkpoint.path),
            checkpoint.tokenizer,
            m.cfg,
            sum(t.numel() for t in m.parameters()),
            str(p.dtype).removeprefix("torch."),
            str(p.device),
        )
