"""Stage 1: extract clean English sentences from Debian-packaged text into work/english.txt."""

import re
import time
from collections.abc import Iterator
from pathlib import Path

from training.common import (
    HANDBOOK,
    WORK,
    clean,
    good_sentence,
    html_paragraphs,
    read_bible,
    split_sentences,
    write_lines,
)

WORDNET = Path("/usr/share/wordnet")
FORTUNES = Path("/usr/share/games/fortunes")
FORTUNE_SKIP = {"art", "ascii-art", "off", "translate-me"}
PYDOC = Path("/usr/share/doc/python3.11-doc/html")
ENGLISH_HINT = re.compile(r"\b(the|a|an|is|are|was|to|of|and|you|i|it|in|that|he|she|we|they|not)\b", re.I)


def as_sentence(text: str) -> str:
    """Capitalise the first letter and add a full stop when there is no final punctuation."""
    return text[0].upper() + text[1:] + ("" if text.endswith((".", "?", "!")) else ".")


def wordnet() -> Iterator[tuple[str, str]]:
    """Yield ("wordnet", sentence) for WordNet usage examples and glosses."""
    for pos in ("noun", "verb", "adj", "adv"):
        for line in (WORDNET / f"data.{pos}").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(" ") or "| " not in line:
                continue
            gloss = line.split("| ", 1)[1]
            examples = re.findall(r'"([^"]+)"', gloss)
            for part in examples + re.sub(r'"[^"]*"', "", gloss).split(";"):
                part = re.sub(r"^\([^)]*\)\s*", "", part.strip(" ;:,"))
                if part:
                    yield "wordnet", as_sentence(part)


def fortunes() -> Iterator[tuple[str, str]]:
    """Yield ("fortunes", sentence) from fortune cookie files, skipping art, offensive and non-English."""
    for path in sorted(FORTUNES.iterdir()):
        if path.suffix or path.name in FORTUNE_SKIP or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for cookie in text.split("\n%\n"):
            lines = [ln for ln in cookie.splitlines() if not re.match(r"\s*(--|―|—)", ln)]
            if any(re.search(r"\s{4,}\S", ln) and not ln.startswith("\t") for ln in lines):
                continue  # layout-dependent text (poems, tables, ascii art)
            for sent in split_sentences(" ".join(lines)):
                if ENGLISH_HINT.search(sent) and sent.isascii():
                    yield "fortunes", sent


def bible() -> Iterator[tuple[str, str]]:
    """Yield ("bible", sentence) from the World English Bible read with diatheke."""
    for text in read_bible("engWEB2015eb").values():
        yield from (("bible", s) for s in split_sentences(text))


def html_tree(name: str, root: Path) -> Iterator[tuple[str, str]]:
    """Yield (name, sentence) from <p> prose in every HTML file under root."""
    for path in sorted(root.rglob("*.html")):
        if path.name.startswith("genindex") or "_static" in path.parts:
            continue
        for para in html_paragraphs(path):
            yield from ((name, s) for s in split_sentences(para))


def main() -> None:
    """Extract, filter, deduplicate and write the English sentences."""
    start = time.time()
    seen: set[str] = set()
    counts: dict[str, int] = {}
    sources = [
        wordnet(),
        fortunes(),
        bible(),
        html_tree("python-doc", PYDOC),
        html_tree("debian-handbook", HANDBOOK / "en-US"),
    ]
    kept: list[str] = []
    for source in sources:
        for name, sent in source:
            sent = clean(sent)
            if sent in seen or not good_sentence(sent):
                continue
            seen.add(sent)
            kept.append(sent)
            counts[name] = counts.get(name, 0) + 1
    write_lines(WORK / "english.txt", kept)
    for name, count in counts.items():
        print(f"{name:16s} {count:7d}")
    print(f"{'total':16s} {len(kept):7d}  ({time.time() - start:.0f}s)")


if __name__ == "__main__":
    main()
