"""Text typed in capitals, in Title Case or starting lower-case ("HELLO WORLD", "Hello World", "hello world"): the
model reads it as its training text is written (in sentence case) and the translation comes back in the casing it was
typed in."""

from __future__ import annotations

import re
from dataclasses import dataclass

WORD = re.compile(r"[^\W\d_]+")  # a run of letters
OPENERS = " \t\n¿¡\"'“‘«("  # may come before the first word
TOKEN = re.compile(r"\S+")  # a word as Title Case capitalises it, with its punctuation ("How's", "(.Deb")


def _first_letter(text: str) -> int:
    """Index of the first letter (past "¿", "¡", quotes...), or -1."""
    match = WORD.search(text)
    return match.start() if match else -1


def _titled(token: str) -> bool:
    """Whether a word's first letter is a capital and the letters after it lower case."""
    letters = [c for c in token if c.isalpha()]
    return letters[0].isupper() and all(c.islower() for c in letters[1:])


def _lowered(token: str) -> str:
    """A word with its first letter in lower case."""
    i = _first_letter(token)
    return token if i < 0 else token[:i] + token[i].lower() + token[i + 1 :]


@dataclass
class Casing:
    """How one unit was typed ("upper": in capitals; "title": every word capitalised; "lower": its first word in lower
    case; "": as the model reads it) and, while its translation streams, what is held until its first word is out."""

    kind: str = ""
    started: bool = False
    held: str = ""  # streamed text held until the first word is whole
    lettered: bool = False  # streamed Title Case: the word being streamed has had its first letter or digit

    @classmethod
    def of(cls, text: str, forms: str = "sentence") -> Casing:
        """The casing a unit was typed in, of the `forms` read in sentence case ("sentence": capitals, Title Case and
        lower case; "capitals": capitals and Title Case; "": none): capitals need two words of two letters or more
        and no lower-case letter; Title Case as much, every word a capital then lower case ("USB", "iPhone" are not)
        and no colon (labels and names: "Name: John City: London"); lower case, a first word in lower case with
        nothing before it but spaces and opening marks."""
        i = _first_letter(text)
        if not forms or i < 0 or len(text.lower()) != len(text) or len(text.upper()) != len(text):
            return cls()  # "ß", "İ": offsets would move
        words = WORD.findall(text)
        two = sum(len(w) > 1 for w in words) >= 2  # two words of two letters or more
        if two and not any(c.islower() for c in text):
            return cls("upper")
        titled = all(_titled(t) for t in TOKEN.findall(text) if WORD.search(t))
        if two and titled and ":" not in text:  # "Name: John City: London": labels and names
            return cls("title")
        if forms == "sentence" and words[0].islower() and not text[:i].strip(OPENERS):
            return cls("lower")
        return cls()

    def model_text(self, text: str) -> str:
        """The unit as the model reads it: sentence case for capitals and Title Case, a capital first letter for lower
        case."""
        if not self.kind:
            return text
        i = _first_letter(text)
        if self.kind == "title":  # "Hello World" -> "Hello world"
            return TOKEN.sub(lambda m: m.group() if m.start() <= i else _lowered(m.group()), text)
        text = text.lower() if self.kind == "upper" else text
        return text[:i] + text[i].upper() + text[i + 1 :]

    def restore(self, text: str) -> str:
        """A whole translation in the casing its unit was typed in."""
        if self.kind == "upper":  # letter by letter: "ß" stays, as it would in a streamed piece
            return "".join(c.upper() if len(c.upper()) == 1 else c for c in text)
        if self.kind == "title":
            return Casing("title").stream(text)
        if self.kind == "lower" and (i := _first_letter(text)) >= 0:
            word = WORD.match(text, i).group()
            if word != "I" and (len(word) == 1 or word[1:].islower()):  # not "USB", not "LibreOffice"
                return text[:i] + text[i].lower() + text[i + 1 :]
        return text

    def stream(self, piece: str, last: bool = False) -> str:
        """The next streamed piece of a translation (`last`: its end), restored as `restore` does the whole."""
        if self.kind == "upper":
            return self.restore(piece)
        if self.kind == "title":  # each word's first letter in capitals, across pieces
            out = []
            for c in piece:
                if c.isspace():
                    self.lettered = False
                elif c.isalnum():  # "3rd" stays
                    c = c.upper() if not self.lettered and len(c.upper()) == 1 else c
                    self.lettered = True
                out.append(c)
            return "".join(out)
        if self.kind != "lower" or self.started:
            return piece
        self.held += piece
        i = _first_letter(self.held)
        if last or i >= 0 and WORD.match(self.held, i).end() < len(self.held):
            self.started, out, self.held = True, self.restore(self.held), ""
            return out
        return ""
