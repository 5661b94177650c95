"""Sentence splitting (split_sentences): sentencex, as app/text.py uses it, against the regex it replaced.

    python -m bench.split_eval

A small hand-written set of English and Spanish texts with their sentences (abbreviations, initials, numbers,
quotes, ellipses, inverted marks, lower-case starts). Prints the share of texts cut exactly right and the precision
and recall of the sentence boundaries, for each splitter.
"""

from __future__ import annotations

import re

from app.text import sentences

# the splitter before sentencex: . ! ? … and closing quotes, then whitespace, then a capital, digit or opening mark
OLD_END = re.compile(r"[.!?…][\"'»”)\]]*(\s+)(?=[\"'«“(\[¿¡]?[A-ZÁÉÍÓÚÑ0-9])")

SET: list[tuple[str, list[str]]] = [
    ("en", ["Dr. Smith arrived at 5 p.m. yesterday."]),
    ("en", ["The cat sleeps.", "The dog runs."]),
    ("en", ["Mr. Brown met Mrs. Green in Washington D.C. on Monday.", "They had lunch."]),
    ("en", ["The U.S. economy grew 3.2% in Q1.", "Analysts were surprised."]),
    ("en", ['He said "Stop."', "Then he left."]),
    ("en", ["Version 2.5 was released in Jan. 2020.", "It is faster."]),
    ("en", ["Is it ready?", "Yes!", "Let's go."]),
    ("en", ["See e.g. chapter 3 for details.", "It covers the basics."]),
    ("en", ["Prof. J. R. Tolkien wrote many books."]),
    ("en", ["The meeting is at 10 a.m. on Friday.", "Please be on time."]),
    ("en", ["I paid $3.50 for coffee.", "It was cold."]),
    ("en", ["Wait... what happened?"]),
    ("en", ["St. Louis is in Missouri.", "Chicago is in Illinois."]),
    ("en", ["Apples, oranges, etc. are fruit.", "Carrots are not."]),
    ("en", ["Call me at 555-1234.", "Or e-mail me."]),
    ("es", ["El Sr. García llegó a las 5 p.m. ayer.", "Luego se fue."]),
    ("es", ["Hoy hace muy buen tiempo.", "Vamos a la playa con los niños."]),
    ("es", ["¿Vienes esta noche?", "¡Claro que sí!"]),
    ("es", ["La Dra. Pérez trabaja en el hospital.", "Es cirujana."]),
    ("es", ["Cuesta 3,50 euros.", "Es barato."]),
    ("es", ["Vivo en la calle Mayor, núm. 5.", "Es un piso pequeño."]),
    ("es", ["Ud. tiene razón.", "Lo siento."]),
    ("es", ["Compré pan, leche, etc. en el mercado.", "Después volví a casa."]),
    ("es", ["Dijo: «Ya voy».", "Pero no vino."]),
    ("es", ["El tren sale a las 8.", "Llega a las 10."]),
    ("en", ["The price rose 5.5 percent.", "Sales fell."]),
    ("en", ["Ms. Lee and Mr. Park arrived together."]),
    ("en", ["It was late.", "everyone had gone home."]),
    ("es", ["Era tarde.", "todos se habían ido a casa."]),
    ("en", ["Chapter 1.", "2 cats sat on the mat."]),
]


def regex_sentences(text: str) -> list[str]:
    """The old splitter's sentences."""
    out, pos = [], 0
    for match in OLD_END.finditer(text):
        out.append(text[pos : match.start(1)])
        pos = match.end()
    return [*out, text[pos:]]


def boundaries(parts: list[str]) -> set[int]:
    """Character offsets (in the text without spaces) where sentences end, the last one excluded."""
    ends, pos = set(), 0
    for part in parts[:-1]:
        pos += len(part.replace(" ", ""))
        ends.add(pos)
    return ends


def score(split) -> tuple[float, float, float]:
    """(exact share, boundary precision, boundary recall) over the set."""
    exact = tp = predicted = expected = 0
    for language, gold in SET:
        got = split(" ".join(gold), language)
        exact += got == gold
        g, p = boundaries(gold), boundaries(got)
        tp, predicted, expected = tp + len(g & p), predicted + len(p), expected + len(g)
    return exact / len(SET), tp / max(predicted, 1), tp / max(expected, 1)


def main() -> None:
    print(f"{len(SET)} texts (en, es), {sum(len(g) for _, g in SET)} sentences")
    for name, split in (("sentencex", sentences), ("old regex", lambda text, _: regex_sentences(text))):
        exact, precision, recall = score(split)
        print(f"  {name:10s} exact {exact:6.1%}  boundary precision {precision:6.1%}  recall {recall:6.1%}")


if __name__ == "__main__":
    main()
