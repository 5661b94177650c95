"""Stage 3: verse-align the World English Bible with Reina-Valera 1909 into work/bible.{en,es}."""

import re
import time

from training.common import WORK, read_bible, write_lines

ARCHAIC = {
    "fué": "fue",
    "Fué": "Fue",
    "dió": "dio",
    "Dió": "Dio",
    "vió": "vio",
    "Vió": "Vio",
    "fuí": "fui",
    "Fuí": "Fui",
    "á": "a",
    "Á": "A",
    "é": "e",
    "É": "E",
    "ó": "o",
    "Ó": "O",
}
ARCHAIC_RE = re.compile(r"\b(" + "|".join(ARCHAIC) + r")\b")
CAPS_START = re.compile(r"^([¡¿«“\"(]?)([A-ZÁÉÍÓÚÑ]{2,})\b")


def modernise(text: str) -> str:
    """Normalise archaic accents and the all-caps first word of a chapter (EN el principio -> En el)."""
    text = ARCHAIC_RE.sub(lambda m: ARCHAIC[m.group(1)], text)
    return CAPS_START.sub(lambda m: m.group(1) + m.group(2).capitalize(), text)


def plausible(en: str, es: str) -> bool:
    """True if both verses are non-empty and their character lengths are within a 1:2 ratio."""
    return bool(en and es) and 0.5 <= len(es) / len(en) <= 2.0


def main() -> None:
    """Pair verses that exist in both modules and write the parallel files."""
    start = time.time()
    english, spanish = read_bible("engWEB2015eb"), read_bible("spaRV1909eb")
    pairs = []
    for key, es in spanish.items():
        book, _, verse = key
        if book == "Psalms" and verse == 1:
            continue  # RV1909 puts the psalm title inside verse 1; the WEB does not
        en = english.get(key, "")
        es = modernise(es)
        if plausible(en, es):
            pairs.append((en, es))
    write_lines(WORK / "bible.en", [en for en, _ in pairs])
    write_lines(WORK / "bible.es", [es for _, es in pairs])
    print(
        f"WEB {len(english)} verses, RV1909 {len(spanish)} verses, kept {len(pairs)} pairs ({time.time() - start:.0f}s)"
    )


if __name__ == "__main__":
    main()
