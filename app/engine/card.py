"""A served model as the HTTP workers see it: the checkpoint without its weights (which stay in the engine core),
and the network's size, dtype and device for /info."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path

from model.loading.description import Description


@dataclass
class ModelCard:
    """What the core sends its workers (pickled, in Ready) once its model is loaded and warm."""

    description: Description
    parameters: int
    dtype: str
    device: str
    dtype_reason: str = "as set"
    version: str = ""  # fingerprint of the checkpoint's files: the translation cache's entries belong to it
    batch: dict = dataclasses.field(default_factory=dict)  # the core's budgets: max_rows, max_tokens, reason

    @property
    def name(self) -> str:
        """The model's name, e.g. "en-es"."""
        return self.description.name

    @classmethod
    def of(cls, checkpoint, dtype_reason: str = "as set") -> ModelCard:
        """The card of a loaded Checkpoint (model.loading.checkpoint); `dtype_reason`: why its precision was chosen."""
        desc = Description(**{f.name: getattr(checkpoint, f.name) for f in dataclasses.fields(Description)})
        device = str(checkpoint.model.device)
        version = fingerprint(Path(desc.path))
        return cls(desc, checkpoint.parameters, checkpoint.precision, device, dtype_reason, version)


def fingerprint(path: Path) -> str:
    """SHA-256 over the names and contents of a checkpoint's files (weights, tokenizer, configs), read once at load
    (about a second per GB): new weights under the same name are a new version."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode() + b"\0")
        with file.open("rb") as f:
            digest.update(hashlib.file_digest(f, "sha256").digest())
    return digest.hexdigest()[:16]
