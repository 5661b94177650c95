"""Text typed in capitals or starting lower-case ("HELLO WORLD", "hello world"): the model reads it as its training
text is written (in sentence case) and the translation comes back in the casing it was typed in."""

from __future__ import annotations

import re
from dataclasses import dataclass

WORD = re.compile(r"[^\W\d_]+")  # a run of letters
OPENERS = " \t\n¿¡\"'“‘«("  # may come before the first word


def _first_letter(text: str) -> int:
    """Index of the first letter (past "¿", "¡", quotes...), or -1."""
    match = WORD.search(text)
    return match.start() if match else -1


@dataclass
class Casing:
    """How one unit was typed ("upper": in capitals; "lower": its first word in lower case; "": as the model reads
    it) and, while its translation streams, what is held until its first word is out."""

    kind: str = ""
    started: bool = False
    held: str = ""  # streamed text held until the first word is whole

    @classmethod
    def of(cls, text: str, forms: str = "sentence") -> Casing:
        """The casing a unit was typed in, of the `forms` read in sentence case ("sentence": capitals and lower case;
        "capitals"; "": none): capitals need two words of two letters or more and no lower-case letter; lower case, a
        first word in lower case with nothing before it but spaces and opening marks."""
        i = _first_letter(text)
        if not forms or i < 0 or len(text.lower()) != len(text) or len(text.upper()) != len(text):
            return cls()  # "ß", "İ": offsets would move
        words = WORD.findall(text)
        if sum(len(w) > 1 for w in words) >= 2 and not any(c.islower() for c in text):
            return cls("upper")
        if forms == "sentence" and words[0].islower() and not text[:i].strip(OPENERS):
            return cls("lower")
        return cls()

    def model_text(self, text: str) -> str:
        """The unit as the model reads it: sentence case for capitals, a capital first letter for lower case."""
        if not self.kind:
            return text
        text = text.lower() if self.kind == "upper" else text
        i = _first_letter(text)
        return text[:i] + text[i].upper() + text[i + 1 :]

    def restore(self, text: str) -> str:
        """A whole translation in the casing its unit was typed in."""
        if self.kind == "upper":  # letter by letter: "ß" stays, as it would in a streamed piece
            return "".join(c.upper() if len(c.upper()) == 1 else c for c in text)
        if self.kind == "lower" and (i := _first_letter(text)) >= 0:
            word = WORD.match(text, i).group()
            if word != "I" and (len(word) == 1 or word[1:].islower()):  # not "USB", not "LibreOffice"
                return text[:i] + text[i].lower() + text[i + 1 :]
        return text

    def stream(self, piece: str, last: bool = False) -> str:
        """The next streamed piece of a translation (`last`: its end), restored as `restore` does the whole."""
        if self.kind == "upper":
            return self.restore(piece)
        if self.kind != "lower" or self.started:
            return piece
        self.held += piece
        i = _first_letter(self.held)
        if last or i >= 0 and WORD.match(self.held, i).end() < len(self.held):
            self.started, out, self.held = True, self.restore(self.held), ""
            return out
        return ""
