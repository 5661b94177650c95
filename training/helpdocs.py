"""Stage 6: GNOME help (gnome-user-docs, Mallard pages) aligned C ↔ es by structure into work/helpdocs.{en,es}."""

import time
import xml.etree.ElementTree as ET
from pathlib import Path

from training.common import BAD, WORK, clean, sentence_pairs, write_lines

HELP = Path("/usr/share/help")
BLOCKS = {"p", "title", "desc", "subtitle"}
SKIP = {"code", "screen", "cmd", "sys", "file", "key", "keyseq", "input", "output", "var"}


def blocks(path: Path) -> list[str] | None:
    """Text of every block element in document order; a block holding code-like inline text becomes ''."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return None
    out = []
    for el in root.iter():
        if el.tag.rsplit("}", 1)[-1] in BLOCKS:
            code = any(c.tag.rsplit("}", 1)[-1] in SKIP for c in el.iter())
            out.append("" if code else clean("".join(el.itertext())))
    return out


def page_pairs(en_path: Path, es_path: Path) -> list[tuple[str, str]]:
    """Blocks paired 1:1 when both pages have the same count, then split into sentences where they agree."""
    en, es = blocks(en_path), blocks(es_path)
    if not en or not es or len(en) != len(es):
        return []
    pairs = []
    for a, b in zip(en, es, strict=True):
        if a and b and a != b and not BAD.search(a) and not BAD.search(b):
            pairs.extend(sentence_pairs(a, b))
    return pairs


def main() -> None:
    """Align every page that exists in C and es, deduplicate by English, write the pairs."""
    start = time.time()
    unique: dict[str, str] = {}
    pages = sorted(HELP.glob("C/*/*.page"))
    for en_path in pages:
        es_path = HELP / "es" / en_path.relative_to(HELP / "C")
        if es_path.exists():
            unique.update(page_pairs(en_path, es_path))
    write_lines(WORK / "helpdocs.en", list(unique))
    write_lines(WORK / "helpdocs.es", list(unique.values()))
    print(f"{len(pages)} pages -> {len(unique)} pairs ({time.time() - start:.0f}s)")


if __name__ == "__main__":
    main()
