"""Stage 8: word pairs from the FreeDict English-Spanish dictionary (dict-freedict-eng-spa) into work/dictionary.*."""

import gzip
import re
from collections import Counter

from training.common import WORK, write_lines

DICT = "/usr/share/dictd/freedict-eng-spa.dict.dz"
HEADWORD = re.compile(r"^([a-z][a-z' -]*) /[^/]*/$")
SENSE = re.compile(r"^(?:\d+\. )?([^\s,;(][^,;(]*)")


def entries(text: str) -> list[tuple[str, list[str]]]:
    """(headword, [first translation of each sense]) in dictd text order (header entries skipped)."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        head = HEADWORD.match(line)
        if head:
            out.append((head.group(1), []))
        elif out and (sense := SENSE.match(line.strip())):
            out[-1][1].append(sense.group(1).strip())
    return out


def plain(es: str) -> bool:
    """A translation of at most two words, none run together (the source lost spaces in some phrases)."""
    return 0 < len(es.split()) <= 2 and all(len(w) <= 14 for w in es.split())


def main() -> None:
    """Headwords that occur once (a repeated one hides run-together phrases) with their first sense."""
    text = gzip.open(DICT, "rt", encoding="utf-8").read()
    found = entries(text)
    times = Counter(en for en, _ in found)
    pairs = [(en, es[0]) for en, es in found if times[en] == 1 and es and plain(es[0]) and es[0] != en]
    write_lines(WORK / "dictionary.en", [en for en, _ in pairs])
    write_lines(WORK / "dictionary.es", [es for _, es in pairs])
    print(f"{len(pairs)} word pairs")


if __name__ == "__main__":
    main()
