"""What a checkpoint is without its weights, in a module that does not import torch: the HTTP workers get it from
their engine core (pickled) and never load the network."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from model.loading.languages import Languages
from model.loading.tokenizer import Tokenizer
from model.network.config import ModelConfig
from model.runner.params import GenerationDefaults


@dataclass
class Description:
    """A checkpoint without its weights: what the HTTP side needs (tokenizer, languages, defaults, limits)."""

    path: Path
    name: str
    kind: str  # native | marian | m2m_100 | mbart
    config: ModelConfig
    tokenizer: Tokenizer
    languages: Languages
    defaults: GenerationDefaults
    casing: dict[str, str]  # per source language, what app.casing gives it in sentence case: "sentence" or "capitals"

    @property
    def source_lang(self) -> str:
        """The source language ("mul" for several)."""
        return self.languages.source

    @property
    def target_lang(self) -> str:
        """The target language ("mul" for several)."""
        return self.languages.target
