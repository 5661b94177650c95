"""The words that agree with a glossary term in the target language ("un ventanal", "la sartén"), and what the model is
asked to learn which form a term takes: the data behind `model.runner.agreement`, as one route's token ids.

A table row is one word in each of the language's forms (Spanish: masculine, feminine, then their plurals; `GENDERS`
gives each column's gender); the first row holds the articles the model scores the term after; the adjectives that come
before a noun follow, after each determiner and alone ("Mi nuevo jefa" -> "Mi nueva jefa", "una nueva aviso" -> "un
nuevo aviso", "nuevo gafas" -> "nuevas gafas"). A word's form is found in the longest row ending before the term ("de
la" -> "del", "todo el" -> "toda la"). The model's scores get a prior for the gender of the term's first word: where the
machine has a morphological analyser for the language (`lexicon`), the gender it gives decides, and for a word it does
not know (a rare one, which the model knows even less) the word's ending decides (Spanish: -a feminine, -o masculine,
with the known exceptions); without an analyser the ending weighs 2 nats. The number likewise: the analyser's, where it
knows the word as a noun ("las imágenes", a plural entry's target: `plurals`), else the ending's ("los ajustes").
Languages without a table get no agreement."""

from __future__ import annotations

import re
from collections.abc import Callable

from app.glossaries.lexicon import Lexicon
from model.runner.params import Agreement, Probe, Word

TABLES: dict[str, tuple[tuple[str, ...], ...]] = {
    "es": (
        ("el", "la", "los", "las"), ("un", "una", "unos", "unas"), ("del", "de la", "de los", "de las"),
        ("al", "a la", "a los", "a las"), ("todo el", "toda la", "todos los", "todas las"),
        ("este", "esta", "estos", "estas"), ("ese", "esa", "esos", "esas"),
        ("aquel", "aquella", "aquellos", "aquellas"), ("nuestro", "nuestra", "nuestros", "nuestras"),
        ("vuestro", "vuestra", "vuestros", "vuestras"), ("algún", "alguna", "algunos", "algunas"),
        ("ningún", "ninguna", "", ""), ("otro", "otra", "otros", "otras"), ("mucho", "mucha", "muchos", "muchas"),
        ("poco", "poca", "pocos", "pocas"), ("cuánto", "cuánta", "cuántos", "cuántas"), ("mi", "mi", "mis", "mis"),
        ("tu", "tu", "tus", "tus"), ("su", "su", "sus", "sus"),
    ),
}  # fmt: skip
ADJECTIVES: dict[str, tuple[tuple[str, ...], ...]] = {  # that come before a noun: mended with the determiner before
    "es": (
        ("nuevo", "nueva", "nuevos", "nuevas"), ("viejo", "vieja", "viejos", "viejas"),
        ("buen", "buena", "buenos", "buenas"), ("mal", "mala", "malos", "malas"),
        ("primer", "primera", "primeros", "primeras"), ("último", "última", "últimos", "últimas"),
        ("pequeño", "pequeña", "pequeños", "pequeñas"), ("mismo", "misma", "mismos", "mismas"),
        ("propio", "propia", "propios", "propias"), ("antiguo", "antigua", "antiguos", "antiguas"),
    ),
}  # fmt: skip
GENDERS = {"es": ("m", "f", "m", "f")}  # each column's gender
NUMBERS = {"es": ("sg", "sg", "pl", "pl")}  # and number
ENDINGS: dict[str, tuple[tuple[str, str], ...]] = {  # (ending, gender), the first that ends the word
    "es": (("ma", ""), ("ión", "f"), ("dad", "f"), ("tad", "f"), ("tud", "f"), ("umbre", "f"), ("a", "f"), ("o", "m"),
           ("or", "m"), ("aje", "m"), ("ón", "m"), ("l", "m"), ("d", "f"), ("ie", "f"), ("e", "m")),
}  # fmt: skip
EXCEPTIONS = {"es": {"foto": "f", "moto": "f", "mano": "f", "radio": "f", "día": "m", "mapa": "m", "sofá": "m",
                     "planeta": "m", "tranvía": "m", "señal": "f", "sal": "f", "cal": "f", "catedral": "f", "piel": "f",
                     "miel": "f", "cárcel": "f", "col": "f", "sucursal": "f", "moral": "f", "credencial": "f",
                     "césped": "m", "ataúd": "m", "huésped": "m", "razón": "f", "calle": "f", "noche": "f",
                     "llave": "f", "nube": "f", "parte": "f", "gente": "f", "leche": "f", "muerte": "f", "suerte": "f",
                     "clase": "f", "frase": "f", "base": "f", "fuente": "f", "carne": "f", "sangre": "f", "torre": "f",
                     "tarde": "f", "mente": "f", "corriente": "f", "nieve": "f", "fiebre": "f", "red": "f",
                     "cookie": "f", "interfaz": "f", "gerente": "", "cliente": "", "estudiante": ""}}  # fmt: skip
ENDING_NATS = 2.0  # the ending's prior without an analyser (measured on the glossary dev set: 1-3 alike)
SUBJECT_NATS = 3.0  # an article's gain before a plural that opens a sentence ("Parches están" needed 2.9)
DECISIVE = 20.0  # nats: with an analyser, its gender or the ending's decides (dev set: 15-40 alike, 10 misses some)
# Source texts the term's form is asked after: neutral ones, and the term's own source after an article ({})
SOURCES: dict[str, tuple[str, ...]] = {"en": ("the {}", "the thing", ".")}
NEUTRAL = (".",)  # for source languages without their own


class Agreeing:
    """One route's agreement data as token ids: the target language's words (each also capitalised) and a probe per
    term. `encode` gives source ids (with the route's prefix), `encode_target` target ids as inside a sentence,
    `lead` the target ids every output starts with (a forced language token)."""

    def __init__(
        self, language: str, sources: tuple[str, ...],
        encode: Callable[[str], list[int]], encode_target: Callable[[str], list[int]], lead: tuple[int, ...] = (),
        lexicon: Lexicon | None = None,
    ):  # fmt: skip
        self.encode, self.encode_target, self.lead, self.language = encode, encode_target, lead, language
        self.lexicon = lexicon
        table = rows(language)
        self.articles, self.sources = table[0], sources
        cases = (str, capital, str.upper)
        self.words = tuple(word for row in table for case in cases for word in self._words(row, case))
        self.openers = tuple(tuple(encode_target(capital(a))) for a in self.articles)

    def _words(self, row: tuple[str, ...], case: Callable[[str], str]) -> list[Word]:
        """The distinct words of a row in a case, each with the forms it fits and its own ids in every form; a word in
        capitals ("EL", a casing the model learnt from text typed so) is swapped for the capitalised form."""
        spelled = tuple(tuple(self.encode_target(case(w))) if w else () for w in row)
        variants = spelled if case is not str.upper else tuple(tuple(self.encode_target(capital(w))) for w in row)
        return [Word(spelled[i], tuple(k for k, v in enumerate(row) if v == w), variants)
                for i, w in enumerate(row)
                if w and row.index(w) == i and (case is not str.upper or w.upper() != capital(w))]  # fmt: skip

    def __call__(
        self, terms: list[tuple | None], capitalised: bool = False, sentence: bool = False
    ) -> Agreement | None:
        """The agreement of a unit's constraints, each (source, target, whether it opens the unit capitalised[, whether
        the target is an entry's plural]) or None for one kept as written; `capitalised`: the unit starts with a
        capital; `sentence`: it is a sentence (not a heading or a status line: "Settings", "Files deleted.")."""
        if not any(terms):
            return None
        probes = tuple(self._probe(*t, capitalised=capitalised, sentence=sentence) if t else None for t in terms)
        return Agreement(probes, self.words, self.openers)

    def _probe(
        self, source: str, target: str, opens: bool, plural: bool = False, capitalised: bool = False,
        sentence: bool = False,
    ) -> Probe:  # fmt: skip
        """The model's question for one term: the term after each article, after each source text (`plural`: the
        target is an entry's plural, whatever the analyser knows of it); a plural that opens a sentence leans to its
        article (a bare plural subject is not Spanish: "Ajustes pueden ser cambiados")."""
        sources = tuple(tuple(self.encode(s.format(source))) for s in self.sources)
        forms = tuple((*self.lead, *self.encode_target(f"{a} {target}")) for a in self.articles)
        gender, number = features(self.language, target.split()[0] if target.split() else "", self.lexicon)
        nats = ENDING_NATS if self.lexicon is None else DECISIVE  # an analyser makes the ending's answer decisive
        number, weight = ("pl", DECISIVE) if plural else (number, nats)
        prior = tuple(nats * (g == gender) + weight * (n == number)
                      for g, n in zip(GENDERS[self.language], NUMBERS[self.language], strict=True))  # fmt: skip
        lower = tuple(self.encode_target(target)) if opens and capital(target) != target else ()
        raise_it = capitalised and not opens and capital(target) != target
        upper = tuple(self.encode_target(capital(target))) if raise_it else ()
        article = SUBJECT_NATS if opens and sentence and number == "pl" else 0.0
        return Probe(sources, forms, prior, lower, upper, article)


def rows(language: str) -> tuple[tuple[str, ...], ...]:
    """The language's table: its determiners (the articles first), each followed by each adjective that comes before
    a noun ("una nueva" -> "un nuevo": the longest row before the term is mended whole), and those adjectives alone
    ("Necesito nuevo gafas" -> "Necesito nuevas gafas"; measured on the glossary sets: no adjective right before a
    term belonged to a noun before it)."""
    dets, adjs = TABLES[language], ADJECTIVES.get(language, ())
    pair = lambda det, adj: tuple(f"{d} {a}" if d and a else "" for d, a in zip(det, adj, strict=True))  # noqa: E731
    both = tuple(pair(det, adj) for det in dets for adj in adjs)
    return (*dets, *both, *adjs)


def features(language: str, word: str, lexicon: Lexicon | None) -> tuple[str, str]:
    """A noun's gender ("m", "f") and number ("sg", "pl", "sp"): the analyser's where it knows the word as a noun, else
    its ending's ("" where neither says)."""
    known = (lexicon.gender(word), lexicon.number(word)) if lexicon is not None else ("", "")
    return known[0] or ending(language, word), known[1] or plural_ending(language, word)


def ending(language: str, term: str) -> str:
    """The gender the ending of a term's first word gives ("m", "f"), its plural ending dropped; "" where it says
    none."""
    word = term.split()[0].lower() if term.split() else ""
    if word.endswith("s") and word[:-1] in EXCEPTIONS[language]:  # "llaves" -> "llave"
        word = word[:-1]
    elif re.search(r"[lnrdjy]es$", word):  # "ventanales" -> "ventanal", "canciones" -> "canción" (accent back)
        word = re.sub(r"on$", "ón", word[:-2])
    elif word.endswith("s"):  # "ajustes" -> "ajuste"
        word = word[:-1]
    if word in EXCEPTIONS[language]:
        return EXCEPTIONS[language][word]
    return next((g for end, g in ENDINGS[language] if word.endswith(end)), "")


def plural_ending(language: str, word: str) -> str:
    """The number a word's ending gives: "pl" for a lowercase Spanish word in -as, -es or -os ("ajustes", which the
    analyser knows only as a verb's form), "" otherwise (a name: "Windows"; "virus", "tesis" end otherwise)."""
    return "pl" if language == "es" and word.islower() and re.search(r"[aeo]s$", word) else ""


def capital(word: str) -> str:
    """The word with a capital first letter (a sentence's first word)."""
    return word[:1].upper() + word[1:]
