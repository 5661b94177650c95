"""Glossary entries in the plural: an entry written in the singular ("password" -> "contraseña") also matches its
source term's plural in a text ("Passwords must ...") and puts its target in the plural there ("contraseñas"), as
users of DeepL's glossaries expect. English and Spanish by rule (English compounds inflect their last word, Spanish
terms their first and the adjectives that agree with it: "disco duro" -> "discos duros", "sitio web" -> "sitios
web"); a verb has none ("allows" is not the plural of "allow" -> "permitir": with an analyser, a word it knows only as
other than a noun; without one, a word ending as an infinitive does). Where the machine has a morphological analyser
for the target language (`lexicon`), a target plural it does not know, of a noun it knows, is not used either (the
entry then matches its singular only, as before)."""

from __future__ import annotations

import re

from app.glossaries.entries import Entry
from app.glossaries.lexicon import Lexicon

EN_IRREGULAR = {
    "man": "men", "woman": "women", "child": "children", "person": "people", "mouse": "mice", "foot": "feet",
    "tooth": "teeth", "goose": "geese", "leaf": "leaves", "knife": "knives", "life": "lives", "wife": "wives",
    "half": "halves", "shelf": "shelves", "wolf": "wolves", "thief": "thieves", "loaf": "loaves", "potato": "potatoes",
    "tomato": "tomatoes", "hero": "heroes", "echo": "echoes", "index": "indexes", "criterion": "criteria",
}  # fmt: skip
EN_INVARIANT = {"data", "information", "software", "hardware", "feedback", "news", "series", "species", "equipment"}
ES_STOP = {"de", "del", "la", "el", "los", "las", "para", "con", "sin", "en", "a", "al", "por", "sobre", "y", "o", "u"}
ES_ADVERBS = {"no", "muy", "más", "menos", "bien", "mal"}  # kept as they are between agreeing words
UNACCENT = str.maketrans("áéíóú", "aeiou")
ACCENT = str.maketrans("aeiou", "áéíóú")
VOWEL_GROUPS = re.compile(r"[aeiouáéíóúü]+")
LAST_WORD = re.compile(r"([\w']+)[^\w']*$")  # the last word of a text


def english(term: str) -> str | None:
    """The plural of an English term (its last word), or None where it has none of its own."""
    head, _, last = term.rpartition(" ")
    low = last.lower()
    if not low.isalpha() or low in EN_INVARIANT:
        return None
    if low in EN_IRREGULAR:
        word = _cased(last, EN_IRREGULAR[low])
    elif re.search(r"(s|x|z|ch|sh)$", low):
        word = last + "es"
    elif re.search(r"[^aeiou]y$", low):
        word = last[:-1] + "ies"
    else:
        word = last + "s"
    return f"{head} {word}" if head else word


def spanish_word(word: str) -> str | None:
    """The plural of one Spanish noun or adjective by the spelling rules (RAE), or None where it keeps its form."""
    low = word.lower()
    if not low.isalpha():
        return None
    syllables = len(VOWEL_GROUPS.findall(low))
    if low[-1] in "aeiouáéíóú":
        return word + "s"  # casa, café, sofá, menú
    if low[-1] == "z":
        return word[:-1] + "ces"  # luz -> luces
    last_accented = re.search(r"[áéíóú][^aeiouáéíóú]*$", low) is not None
    if low[-1] in "sx" and not last_accented and syllables > 1:
        return None  # lunes, virus, tórax: the plural is the word
    if last_accented:
        return word[:-2] + word[-2:].translate(UNACCENT) + "es"  # canción -> canciones, autobús -> autobuses
    if low[-1] == "n" and syllables > 1 and not re.search("[áéíóú]", low):
        groups = list(VOWEL_GROUPS.finditer(low))
        g = groups[-2]  # its stressed syllable, which the plural makes the third from the end: examen -> exámenes
        strong = next((i for i in range(g.start(), g.end()) if low[i] in "aeo"), g.end() - 1)
        return word[:strong] + word[strong].translate(ACCENT) + word[strong + 1 :] + "es"
    if low[-1] in "lrndjysx":
        return word + "es"  # papel, servidor, red, reloj, ley, mes
    return word + "s"  # loanwords: web -> webs, clic -> clics, robot -> robots


def spanish(term: str, lexicon: Lexicon | None = None) -> str | None:
    """The plural of a Spanish term: its first word and the adjectives after it, up to a preposition or article
    (with an analyser: the words it knows as adjectives or participles; without: those ending in -o or -a)."""
    words = term.split(" ")
    noun = lexicon.noun(words[0]) if lexicon is not None else not re.search(r"(ar|er|ir)$", words[0].lower())
    head = spanish_word(words[0]) if noun is not False else None  # not a verb: "permitir" has no plural
    if head is None or noun and lexicon is not None and lexicon.number(head) not in ("pl", "sp"):
        return None  # the analyser knows the noun, and not this plural of it ("carácter": "carácteres")
    out = [head]
    for k, word in enumerate(words[1:], 1):
        if word.lower() in ES_STOP:
            return " ".join(out + words[k:])
        agrees = lexicon.agrees(word) if lexicon is not None else word.lower()[-1:] in ("o", "a")
        plural = spanish_word(word) if agrees and word.lower() not in ES_ADVERBS else None
        out.append(plural or word)
    return " ".join(out)


SUBJECTS = {"it", "he", "she", "this", "that", "which", "who", "what", "one", "everyone", "someone", "nobody",
            "also", "often", "always", "never", "usually", "sometimes", "automatically", "only", "still", "just",
            "already", "now", "then", "it's"}  # fmt: skip  # before them a word like a plural is a verb: "it updates"


class Plurals:
    """The plural entries of a route: from a source language and a target language that both have rules (`lexicon`:
    the target language's analyser, `source_lexicon` the source language's, where installed)."""

    RULES = ("en", "es")

    def __init__(
        self, source: str, target: str, lexicon: Lexicon | None = None, source_lexicon: Lexicon | None = None
    ):  # fmt: skip
        self.source, self.target, self.lexicon, self.source_lexicon = source, target, lexicon, source_lexicon

    @classmethod
    def of(
        cls, source: str, target: str, lexicon: Lexicon | None = None, source_lexicon: Lexicon | None = None
    ) -> Plurals | None:  # fmt: skip
        """The route's plurals, or None where either language has no rules."""
        if source not in cls.RULES or target not in cls.RULES:
            return None
        return cls(source, target, lexicon, source_lexicon)

    def verb_before(self, text: str, start: int) -> bool:
        """Whether the word before `start` makes a plural-looking word there a verb ("it updates", "this allows")."""
        before = LAST_WORD.search(text[:start])
        return self.source == "en" and before is not None and before.group(1).lower() in SUBJECTS

    def entry(self, entry: Entry) -> Entry | None:
        """(the source's plural, the target's plural) of a singular entry, or None: a term kept as written (a name),
        one with no plural of its own, or one whose target plural the analyser does not confirm."""
        source, target = entry
        if source == target:
            return None
        plural_source = self._plural(self.source, source)
        if plural_source and self.source_lexicon is not None and not self.source_lexicon.plural_noun(plural_source):
            return None  # "allows": a verb only
        plural_target = self._plural(self.target, target) if plural_source else None
        return (plural_source, plural_target) if plural_target else None

    def _plural(self, language: str, term: str) -> str | None:
        """The term's plural in `language` (the target's checked by its analyser), or None where it has none."""
        plural = english(term) if language == "en" else spanish(term, self.lexicon if language == self.target else None)
        return plural if plural and plural.lower() != term.lower() else None


def _cased(like: str, word: str) -> str:
    """`word` with the case of `like` (all capitals or a capital first letter)."""
    if like.isupper() and len(like) > 1:
        return word.upper()
    return word[:1].upper() + word[1:] if like[:1].isupper() else word
