"""A text as the server translates it: literal pieces that stay, and units the model translates one by one."""

from __future__ import annotations

import html
from dataclasses import dataclass


@dataclass
class Layout:
    """A text cut into pieces: literal pieces stay, unit pieces are translated (by index into `units`)."""

    pieces: list[str | int]
    units: list[str]
    escape: bool = False  # HTML: translated text is escaped when put back

    def render(self, text: str) -> str:
        """A unit's translated text as it appears in the output."""
        return html.escape(text, quote=False) if self.escape else text

    def join(self, translations: list[str]) -> str:
        """Put translated units back between the literal pieces."""
        return "".join(self.render(translations[p]) if isinstance(p, int) else p for p in self.pieces)
