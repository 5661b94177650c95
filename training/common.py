"""Shared helpers for the training-data pipeline: paths, cleaning, sentence splitting, HTML text."""

import html
import re
import subprocess
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

WORK = Path(__file__).resolve().parent / "work"
HANDBOOK = Path("/usr/share/doc/debian-handbook/html")
EVERYDAY = Path(__file__).resolve().parent / "everyday.tsv"  # hand-written test phrases: never trained on
EVERYDAY2 = Path(__file__).resolve().parent / "everyday2.tsv"  # a second, independent set: never trained on either
FIRST = Path(__file__).resolve().parent / "first_phrases.tsv"  # what people type first, with alternatives: held out

_SPLIT = re.compile(r"(?<=[.!?])[\"”’)]?\s+(?=[\"“‘(¿¡«]?[A-ZÁÉÍÓÚÑ])")
_ABBREV = re.compile(r"\b(?:e\.g|i\.e|etc|Mr|Mrs|Ms|Dr|St|vs|cf|No|Fig|Vol|viz)\.$")
BAD = re.compile(r"https?:|www\.|@\S+\.|>>>|::|[{}<>\\|_=^~]|\.\.\.\.|\t|\$\(|/\w+/\w+")
_SPACE = re.compile(r"\s+")
_VERSE = re.compile(r"^(?:.*?\s)??((?:I{1,3} )?[A-Z][a-z]+(?: of [A-Z][a-z]+)*) (\d+):(\d+): (.*)$")
_TAG = re.compile(r"<[^>]+>")


def clean(text: str) -> str:
    """Unicode-normalise and collapse whitespace."""
    text = unicodedata.normalize("NFC", html.unescape(text)).replace("\u00a0", " ")
    return _SPACE.sub(" ", text).strip()


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences with a conservative regex (merging after abbreviations)."""
    out: list[str] = []
    for match in _SPLIT.split(clean(text)):
        piece = match.strip()
        if out and _ABBREV.search(out[-1]):
            out[-1] = f"{out[-1]} {piece}"
        elif piece:
            out.append(piece)
    return out


def sentence_pairs(en: str, es: str) -> list[tuple[str, str]]:
    """A multi-sentence pair split into sentence pairs when both sides have the same count, else kept whole."""
    en_s, es_s = split_sentences(en), split_sentences(es)
    return list(zip(en_s, es_s, strict=True)) if 1 < len(en_s) == len(es_s) else [(en, es)]


def n_words(text: str) -> int:
    """Number of whitespace-separated words."""
    return len(text.split())


def good_sentence(text: str, lo: int = 3, hi: int = 40) -> bool:
    """True for a prose-like sentence of lo..hi words without code, URLs or markup."""
    if not lo <= n_words(text) <= hi or BAD.search(text):
        return False
    letters = sum(ch.isalpha() for ch in text)
    upper = sum(ch.isupper() for ch in text)
    if letters < 0.6 * len(text) or upper > 0.3 * letters or not (text[0].isalpha() or text[0] in '"“‘('):
        return False
    return text[-1].isalnum() or text[-1] in '.!?"”’)'


class ParagraphParser(HTMLParser):
    """Collect the text of <p> and <div class="para"> elements (skipping code blocks) from an HTML page."""

    SKIP = {"pre", "script", "style", "table"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._buf: list[str] | None = None
        self._skip = 0
        self._divs: list[bool] = []  # for each open <div>: does it start a paragraph?

    def handle_starttag(self, tag: str, attrs: list) -> None:
        is_para = tag == "p" or (tag == "div" and ("class", "para") in attrs)
        if tag in self.SKIP:
            self._skip += 1
        elif is_para or tag == "div":
            self._flush()
            self._buf = [] if is_para else None
        if tag == "div":
            self._divs.append(is_para)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag == "p" or (tag == "div" and self._divs and self._divs.pop()):
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._buf is not None and not self._skip:
            self._buf.append(data)

    def _flush(self) -> None:
        if self._buf is not None:
            text = clean("".join(self._buf))
            if text:
                self.paragraphs.append(text)
        self._buf = None


def html_paragraphs(path: Path) -> list[str]:
    """Return the cleaned <p> paragraphs of one HTML file."""
    parser = ParagraphParser()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    parser._flush()
    return parser.paragraphs


def write_lines(path: Path, lines: list[str]) -> None:
    """Write one item per line (creating the work directory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def read_lines(path: Path) -> list[str]:
    """Read a one-item-per-line file."""
    return path.read_text(encoding="utf-8").splitlines()


def first_phrases() -> tuple[list[list[str]], list[list[str]]]:
    """The phrases people type first (`FIRST`): each line's English and Spanish alternatives (" | " between them)."""
    rows = [line.split("\t") for line in read_lines(FIRST) if line.strip() and not line.startswith("#")]
    return tuple([[alt.strip() for alt in row[side].split(" | ")] for row in rows] for side in (0, 1))


def everyday_held_out() -> list[str]:
    """Every held-out everyday phrase, both languages: both everyday sets and every alternative of the phrases people
    type first."""
    phrases = [side for path in (EVERYDAY, EVERYDAY2) for pair in read_tsv(path) for side in pair]
    return phrases + [alt for side in first_phrases() for alts in side for alt in alts]


def read_tsv(path: Path) -> list[tuple[str, str]]:
    """Read tab-separated (English, Spanish) pairs."""
    return [tuple(line.split("\t")) for line in read_lines(path)]


def read_bible(module: str) -> dict[tuple[str, int, int], str]:
    """Read a SWORD Bible with diatheke as {(book, chapter, verse): text}, dropping injected headings."""
    out = subprocess.run(
        ["diatheke", "-b", module, "-f", "OSIS", "-k", "Gen 1:1-Rev 22:21"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    verses = {}
    for line in out.splitlines():
        match = _VERSE.match(line)  # anything before "Book c:v:" is a heading diatheke repeats
        if match:
            text = clean(_TAG.sub("", match.group(4).replace("</w><w>", "</w> <w>")))
            if text:
                verses[match.group(1), int(match.group(2)), int(match.group(3))] = text
    return verses
