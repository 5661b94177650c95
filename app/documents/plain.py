"""Plain text (one segment per non-blank line) and SubRip subtitles (one segment per cue, timings kept)."""

from __future__ import annotations

import srt

from app.documents import Segment, one_run
from app.errors import ApiError


def decode(data: bytes, kind: str) -> str:
    """UTF-8 text (a byte-order mark is dropped), or 422."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ApiError(422, "validation", f"file: a {kind} file must be UTF-8 ({exc})") from None


class TextFile:
    """A .txt file: every line with text is a segment; blank lines and each line's indentation stay."""

    def __init__(self, data: bytes):
        self.lines = decode(data, "txt").splitlines(keepends=True)
        self.segments: list[Segment] = []
        for i, line in enumerate(self.lines):
            core = line.strip()
            if core:
                self.segments.append(one_run(core, self._writer(i, line, core)))

    def _writer(self, i: int, line: str, core: str):
        """Put a line's translation between its own leading and trailing whitespace."""
        lead, trail = line[: line.index(core)], line[line.index(core) + len(core) :]
        return lambda text: self.lines.__setitem__(i, lead + text + trail)

    def save(self) -> bytes:
        """The lines, joined as they came."""
        return "".join(self.lines).encode("utf-8")


class SubRip:
    """An .srt file: each cue's text is a segment (its lines joined by a space); index and timings stay."""

    def __init__(self, data: bytes):
        try:
            self.cues = list(srt.parse(decode(data, "srt")))
        except srt.SRTParseError as exc:
            raise ApiError(422, "validation", f"file: not a valid srt file ({exc})") from None
        self.segments = [
            one_run(" ".join(c.content.split()), self._writer(c), markup=True) for c in self.cues if c.content.strip()
        ]

    @staticmethod
    def _writer(cue: srt.Subtitle):
        """Write a cue's translation."""
        return lambda text: setattr(cue, "content", text)

    def save(self) -> bytes:
        """The cues, re-composed with their own indices and timings."""
        return srt.compose(self.cues, reindex=False).encode("utf-8")
