"""A text as the server translates it: literal pieces that stay, and units the model translates one by one."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from app.inline import Tagged


@dataclass
class Layout:
    """A text cut into pieces: literal pieces stay, unit pieces are translated (by index into `units`)."""

    pieces: list[str | int]
    units: list[str]
    escape: bool = False  # HTML: translated text is escaped when put back
    tagged: dict[int, Tagged] = field(default_factory=dict)  # units whose inline tags go back by alignment
    fallbacks: int = 0  # tags kept today's way (text between them translated apart) though asked to align

    def render(self, text: str, unit: int | None = None) -> str:
        """A unit's translated text as it appears in the output (a tagged unit's is markup already)."""
        return html.escape(text, quote=False) if self.escape and unit not in self.tagged else text

    def join(self, translations: list[str]) -> str:
        """Put translated units back between the literal pieces."""
        return "".join(self.render(translations[p], p) if isinstance(p, int) else p for p in self.pieces)
