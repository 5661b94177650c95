"""The words after a glossary term that agree with it: an adjective or participle right after the term (not after a noun
after "de": "el coche de mi jefa nuevo"), or after a verb like "ser" or "estar" whose subject the term is, at the
start of its clause ("Mi coche está aparcado", not "El coche de mi jefa está aparcado"; "una colonia tranquila"); and
where the term is in a phrase after its clause's subject, the word after the verb that took the term's gender takes
the subject's ("El coche de mi jefa está aparcada" -> "aparcado"). The model chose them for its own word
("furgoneta", "barrio"); the term's gender is the analyser's (else its ending's), and the word takes the other ending
only where the analyser knows both forms. Same length: alignments and offsets keep. Languages without a table are
left as they are."""

from __future__ import annotations

import re

from app.glossaries.agreement import ADJECTIVES, features
from app.glossaries.lexicon import Lexicon

COPULAS: dict[str, frozenset[str]] = {
    "es": frozenset("es son era eran fue fueron será serán sea sean está están estaba estaban estuvo estuvieron estará "
                    "estarán esté estén parece parecen parecía quedó quedaron queda quedan sigue siguen".split()),
}  # fmt: skip
DETERMINERS: dict[str, frozenset[str]] = {
    "es": frozenset("el la los las un una unos unas mi mis tu tus su sus nuestro nuestra nuestros nuestras vuestro "
                    "vuestra vuestros vuestras este esta estos estas ese esa esos esas aquel aquella aquellos "
                    "aquellas".split()),
}  # fmt: skip
BEFORE_NOUN = {language: frozenset(w for row in rows for w in row) for language, rows in ADJECTIVES.items()}
OPENERS: dict[str, frozenset[str]] = {  # words after which a clause, and so its subject, starts
    "es": frozenset("y e o u pero porque que cuando si aunque pues mientras".split()),
}
OF: dict[str, frozenset[str]] = {"es": frozenset({"de", "del"})}  # "el coche de mi jefa": what follows may be coche's
PHRASES: dict[str, frozenset[str]] = {  # prepositions that put a term in a phrase after its clause's subject
    "es": frozenset("de del en sobre con sin para bajo tras".split()),
}
LINKS: dict[str, frozenset[str]] = {"es": frozenset({"a", "de"})}  # after a word, make it a phrase's: "junto a"
ADVERBS: dict[str, frozenset[str]] = {
    "es": frozenset("muy tan más menos bastante demasiado no ya todavía aún siempre algo casi ahora completamente "
                    "totalmente".split()),
}  # fmt: skip
ENDINGS: dict[str, dict[str, tuple[tuple[str, str], ...]]] = {  # per gender wanted: (ending, its replacement)
    "es": {"m": (("as", "os"), ("a", "o")), "f": (("os", "as"), ("o", "a"))},
}
REACH = 6  # words from the term to the verb at most
TOKEN = re.compile(r"\w+|[^\w\s]")


def mend(text: str, terms: list[str], language: str, lexicon: Lexicon | None) -> str:
    """`text` with each word after one of `terms` that should agree with it and does not given the term's gender
    (its first word's, as the analyser or else its ending gives it; same number only)."""
    if lexicon is None or language not in COPULAS:
        return text
    for term in terms:
        head = term.split()[0] if term.split() else ""
        gender, number = features(language, head, lexicon)
        if not gender:
            continue
        for found in re.finditer(rf"(?<!\w){re.escape(term)}(?!\w)", text, re.IGNORECASE):
            before = _word_before(text, found.start(), language)
            noun = _subject(text, found.start(), language, lexicon) if before in PHRASES[language] else None
            if noun is not None:  # the term in a phrase after the subject: the copula's word agrees with that
                at = _agreeing_word(text, found.end(), *noun, language, lexicon, True, False)
                if at is not None and lexicon.agreeing(at.group(), only=False)[0] == gender:  # the term's, mistaken
                    text = _swapped(text, at, noun[0], language, lexicon)
                continue
            if before in OF[language]:
                continue
            subject = before is None or before in OPENERS[language]
            at = _agreeing_word(text, found.end(), gender, number, language, lexicon, subject)
            if at is not None:
                text = _swapped(text, at, gender, language, lexicon)
    return text


def _word_before(text: str, start: int, language: str) -> str | None:
    """The word before a term starting at `start`, its determiners and the adjectives that come before a noun passed
    over ("Nuestra nueva jefa es": the term opens its clause; lowered; "." for punctuation; None at the text's
    start)."""
    for token in reversed(TOKEN.findall(text[:start])):
        word = token.lower()
        if not word.isalpha():
            return "."
        if word not in DETERMINERS[language] and word not in BEFORE_NOUN.get(language, ()):
            return word
    return None


def _subject(text: str, start: int, language: str, lexicon: Lexicon) -> tuple[str, str] | None:
    """The gender and number of the noun that opens the clause of a term starting at `start` inside a phrase after it
    ("El coche de mi jefa": "coche", m, sg): determiners, a noun the analyser knows, a preposition, determiners, the
    term; None for any other shape."""
    words = [t.lower() for t in reversed(TOKEN.findall(text[:start]))]
    while words and words[0] in DETERMINERS[language]:
        words.pop(0)
    if len(words) < 3 or words[0] not in PHRASES[language] or not lexicon.noun(words[1]):
        return None
    k = 2
    while k < len(words) and words[k] in DETERMINERS[language]:
        k += 1
    opens = k == len(words) or not words[k].isalpha() or words[k] in OPENERS[language]
    gender = lexicon.gender(words[1])
    return (gender, lexicon.number(words[1])) if k > 2 and opens and gender in ("m", "f") else None


def _agreeing_word(
    text: str, start: int, gender: str, number: str, language: str, lexicon: Lexicon, subject: bool,
    adjacent: bool = True,
) -> re.Match | None:  # fmt: skip
    """The word after the term ending at `start` that disagrees with `gender`: the next word (`adjacent`), or where the
    term opens its clause (`subject`) the one after a copula (and adverbs); None when there is none, or another noun
    between could be what it agrees with."""
    tokens = list(TOKEN.finditer(text, start))[: REACH + 4]
    if not tokens:
        return None
    first = tokens[0]
    if adjacent and _disagrees(lexicon.agreeing(first.group()), gender, number):
        return first
    if not subject:
        return None
    between = []
    for k, tok in enumerate(tokens[:REACH]):
        word = tok.group().lower()
        if not word.isalpha():
            return None  # punctuation: the clause ended
        if word in COPULAS[language]:
            rest = [t for t in tokens[k + 1 :] if t.group().lower() not in ADVERBS[language]]
            if not rest or not rest[0].group().isalpha():
                return None
            form = lexicon.agreeing(rest[0].group(), only=False)
            if not _disagrees(form, gender, number) or (len(rest) > 1 and rest[1].group().lower() in LINKS[language]):
                return None  # agrees, or begins a phrase of its own ("junto a")
            if any(lexicon.noun(w) is None or lexicon.gender(w) == form[0] for w in between):
                return None  # an unknown word or a noun of its gender between: it may agree with that one
            return rest[0]
        between.append(word)
    return None


def _disagrees(form: tuple[str, str] | None, gender: str, number: str) -> bool:
    """Whether an adjective's (gender, number) is of the other gender and the term's number (where known)."""
    return form is not None and form[0] != gender and (number not in ("sg", "pl") or form[1] == number)


def _swapped(text: str, word: re.Match, gender: str, language: str, lexicon: Lexicon) -> str:
    """`text` with `word` in `gender` where the analyser knows that form, else as it was."""
    old = word.group()
    for end, other in ENDINGS[language][gender]:
        if old.lower().endswith(end):
            new = old[: len(old) - len(end)] + (other.upper() if old[-1].isupper() else other)
            form = lexicon.agreeing(new, only=False)
            if form is not None and form[0] == gender:
                return text[: word.start()] + new + text[word.end() :]
            break
    return text
