"""A served model as the HTTP workers see it: the checkpoint without its weights (which stay in the engine core),
and the network's size, dtype and device for /info."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from model.description import Description


@dataclass
class ModelCard:
    """What the core sends its workers (pickled, in Ready) once its model is loaded and warm."""

    description: Description
    parameters: int
    dtype: str
    device: str
    dtype_reason: str = "as set"

    @property
    def name(self) -> str:
        """The model's name, e.g. "en-es"."""
        return self.description.name

    @classmethod
    def of(cls, checkpoint, dtype_reason: str = "as set") -> ModelCard:
        """The card of a loaded model.checkpoint.Checkpoint; `dtype_reason` says why its precision was chosen."""
        desc = Description(**{f.name: getattr(checkpoint, f.name) for f in dataclasses.fields(Description)})
        device = str(checkpoint.model.device)
        return cls(desc, checkpoint.parameters, checkpoint.precision, device, dtype_reason)
