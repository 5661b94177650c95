"""Glossary outputs that read well, measured (issue 42): the hand-written en->es term sets
(bench/data/glossary_eval.tsv, split dev/test, the independent bench/data/glossary_check.tsv, and
bench/data/glossary_short.tsv: abbreviations the model reads as the start of its own longer word;
bench/data/glossary_twoword.tsv: one-word terms for two-word sources) and the metrics that catch the ways a forced term
spoils a sentence. Pure Python (sacrebleu for chrF): no model, no server.

Each TSV row: split, English, a reference that uses the terms verbatim, and 1-3 terms `source=target=replaced=gender`
joined by ` | `: the English term, the Spanish term the output must hold (as written: capitalised where it begins
the Spanish sentence), the word(s) a plain translation uses instead (alternatives joined by `/`, `-` for none), and
the term's gender/number (m, f, mp, fp; c, cp for a noun of either gender that the source leaves open, "el/la gerente";
`-` for brand names and non-nouns). A source that equals its target is a
do-not-translate entry. One glossary serves a whole file: `glossary(rows)`.

The metrics, per term of a row (each needed as many times as its source occurs in the English):
- exact: the target appears as whole word(s), case-sensitive, as often as needed (`whole_word`, `count`);
- whole-word: among terms whose target appears at all (any case, even inside a longer word), those that appear as
  whole words ("jefas" holds "jefa" but not as a whole word);
- after the end: the target stands after the output's last expected sentence ("Mi jefe está de vacaciones. jefa.");
- appended: the output is the plain output with words stuck on its end, the target among them;
- replaced beside: the word the term replaces (or its English source, untranslated) stays within 2 words of it
  ("cartera billetera", "fridge nevera", "uni universidad"); replaced kept: it stays anywhere;
- determiner: the word right before the target is an article, demonstrative, possessive or quantifier that does not
  agree with the term's gender/number ("el foto", "una ventanal"); adjectives are not checked;
- broken words: an output word, in neither the reference nor the plain output, that is one of their words (4+
  letters) with 1-2 letters stuck on, that word itself missing ("autobúss", "sanitarios"), or, next to a term, the
  start of one of their words ("aniver obsequio", "Car carpetas"): a word the term broke;
- window overlap (WMT21 terminology task): of the reference words within 2 words either side of the term, the share
  found within 2 words either side of it in the output (0 where the output lacks the term);
and per corpus: chrF of the outputs and of the plain (glossary-less) outputs against the references, and the share of
sentences whose chrF falls more than 10 points below their plain output's; a sentence is clean when its terms are all
exact, none of the flags above is raised (replaced kept included) and its chrF does not drop."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import sacrebleu

DATA = Path(__file__).resolve().parent / "data"
EVAL, CHECK, SHORT = DATA / "glossary_eval.tsv", DATA / "glossary_check.tsv", DATA / "glossary_short.tsv"
TWOWORD = DATA / "glossary_twoword.tsv"  # one-word terms for two-word sources ("semáforo" for "traffic light")
SETS = {"eval": EVAL, "check": CHECK, "short": SHORT, "twoword": TWOWORD}  # short: abbreviations, checked apart
HEADER = "split\tenglish\treference\tterms"
GENDERS = ("m", "f", "mp", "fp", "c", "cp", "-")
COMMON = {"c": ("m", "f"), "cp": ("mp", "fp")}  # a common-gender noun: either article is right
SPLITS = ("dev", "test", "check", "short", "twoword")
REACH = 2  # words either side: the replaced word's reach and the overlap window
CHRF_DROP = 10.0  # sentence chrF points below the plain output's that count as a drop
WORDS = re.compile(r"[^\W_]+")  # a word: letters and digits
SENTENCE_END = re.compile(r"(?:\.\.\.|[.!?…])+[\"'»”)\]]*\s+(?=\S)")  # a sentence-final mark, then more text

# Spanish determiners -> the genders/numbers they go with ("el agua" and the like are not handled: none in the sets)
_S, _P = ("m", "f"), ("mp", "fp")
DETERMINERS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(["el", "un", "del", "al", "este", "ese", "aquel", "nuestro", "vuestro", "algún", "ningún",
                     "otro", "mucho", "poco", "cuánto"], ("m",)),
    **dict.fromkeys(["la", "una", "esta", "esa", "aquella", "nuestra", "vuestra", "alguna", "ninguna", "otra",
                     "mucha", "poca", "cuánta"], ("f",)),
    **dict.fromkeys(["los", "unos", "estos", "esos", "aquellos", "nuestros", "vuestros", "algunos", "otros",
                     "muchos", "pocos", "cuántos"], ("mp",)),
    **dict.fromkeys(["las", "unas", "estas", "esas", "aquellas", "nuestras", "vuestras", "algunas", "otras",
                     "muchas", "pocas", "cuántas"], ("fp",)),
    **dict.fromkeys(["mi", "tu", "su", "cada"], _S),
    **dict.fromkeys(["mis", "tus", "sus"], _P),
}  # fmt: skip


@dataclass(frozen=True)
class Term:
    """One glossary term of a row: English source, required Spanish target, the word(s) it replaces, gender."""

    source: str
    target: str
    replaced: tuple[str, ...]
    gender: str

    @property
    def verbatim(self) -> bool:
        """A do-not-translate entry: the target is the source."""
        return self.source == self.target

    @property
    def leftovers(self) -> tuple[str, ...]:
        """The words a term replaces, the English source itself (left untranslated) included."""
        return self.replaced if self.verbatim else tuple(dict.fromkeys([*self.replaced, self.source.lower()]))


@dataclass(frozen=True)
class Row:
    """One sentence of a set: split, English, reference and its terms."""

    split: str
    english: str
    reference: str
    terms: tuple[Term, ...]

    def needed(self, term: Term) -> int:
        """How often the term's target must appear: as often as its source occurs in the English, outside the
        places of the row's longer terms ("room" in "living room")."""
        longer = [s for t in self.terms if len(t.source) > len(term.source)
                  for s in spans(self.english, t.source, ignore_case=True)]  # fmt: skip
        places = spans(self.english, term.source, ignore_case=True)
        return sum(not any(a < y and b > x for x, y in longer) for a, b in places)

    def entry(self, term: Term) -> tuple[str, str]:
        """The term as a glossary holds it: a capital that only begins the sentence is lower-cased."""
        if not term.verbatim and self.english.startswith(term.source):
            return term.source[0].lower() + term.source[1:], term.target[0].lower() + term.target[1:]
        return term.source, term.target


def parse_term(text: str) -> Term:
    """A `source=target=replaced=gender` entry."""
    source, target, replaced, gender = (p.strip() for p in text.split("="))
    alternatives = () if replaced == "-" else tuple(r.strip() for r in replaced.split("/"))
    return Term(source, target, alternatives, gender)


def read(path: Path = EVAL, split: str | None = None) -> list[Row]:
    """The rows of a set (header and blank lines skipped), of one split when given."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line == HEADER:
            continue
        sp, en, ref, terms = line.split("\t")
        rows.append(Row(sp, en, ref, tuple(parse_term(t) for t in terms.split(" | "))))
    return [r for r in rows if split is None or r.split == split]


def glossary(rows: Iterable[Row]) -> dict[str, str]:
    """One glossary for the rows: source -> target, as a user would write it (first seen wins)."""
    out: dict[str, str] = {}
    keys: set[str] = set()
    for row in rows:
        for term in row.terms:
            source, target = row.entry(term)
            if source.casefold() not in keys:
                keys.add(source.casefold())
                out[source] = target
    return out


def _pattern(phrase: str) -> str:
    """A phrase as whole word(s): no letter or digit either side, any whitespace between its words."""
    return r"(?<![^\W_])" + r"\s+".join(map(re.escape, phrase.split())) + r"(?![^\W_])"


def spans(text: str, phrase: str, ignore_case: bool = False) -> list[tuple[int, int]]:
    """Where the phrase stands as whole word(s) in the text."""
    return [m.span() for m in re.finditer(_pattern(phrase), text, re.IGNORECASE if ignore_case else 0)]


def count(text: str, phrase: str, ignore_case: bool = False) -> int:
    """How often the phrase stands as whole word(s) in the text."""
    return len(spans(text, phrase, ignore_case))


def whole_word(output: str, target: str, ignore_case: bool = False) -> bool:
    """The target appears as whole word(s): no letter or digit right before or right after it."""
    return bool(spans(output, target, ignore_case))


def appears(output: str, target: str) -> bool:
    """The target appears at all, in any case, even inside a longer word."""
    return target.casefold() in output.casefold()


def sentences(text: str) -> list[str]:
    """The text cut after each sentence-final mark (. ! ? … ...) that more text follows (abbreviations cut too)."""
    return [s for s in SENTENCE_END.split(text.strip()) if s]


def after_end(output: str, target: str, source: str = "") -> bool:
    """The target (any case, even inside a word) stands after the output's last expected sentence: the sentences
    of `source` (one when not given) are expected, and text after the end of those holds the target."""
    expected = max(1, len(sentences(source)))
    return appears(" ".join(sentences(output)[expected:]), target)


def appended(output: str, target: str, plain: str) -> bool:
    """The output is the plain output with words stuck on after its end, the target (any case, even inside a word)
    among them: "Mi jefe está de vacaciones. jefa.", "Ven a mi oficina después de la reunión despacho."."""
    p, o = words(plain), words(output)
    return len(o) > len(p) and o[: len(p)] == p and appears(" ".join(o[len(p) :]), target)


def _alternatives(replaced: str | Sequence[str]) -> tuple[str, ...]:
    """Replaced words as a tuple: a string is split at `/`; `-` and empty mean none."""
    if isinstance(replaced, str):
        return () if replaced.strip() in ("", "-") else tuple(replaced.split("/"))
    return tuple(replaced)


def _word_range(words: list[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """The first and last indexes of the words a character span touches."""
    inside = [i for i, (a, b) in enumerate(words) if a < end and b > start]
    return inside[0], inside[-1]


def _replaced_spans(output: str, target: str, replaced: str | Sequence[str]) -> list[tuple[int, int]]:
    """Whole-word places (any case) of the replaced words that are not inside an occurrence of the target ("ventana"
    in "ventanal"; a replaced word that holds the target is no occurrence of it: "universidad" for "uni")."""
    folded = output.casefold()
    taken = [(m.start(), m.end()) for m in re.finditer(re.escape(target.casefold()), folded)]
    found = [s for alt in _alternatives(replaced) for s in spans(output, alt, ignore_case=True)]
    return [(a, b) for a, b in found if not any(x <= a and b <= y for x, y in taken)]


def replaced_kept(output: str, target: str, replaced: str | Sequence[str]) -> bool:
    """A word the term replaces still stands in the output (whole word, any case), outside the target."""
    return bool(_replaced_spans(output, target, replaced))


def replaced_beside(output: str, target: str, replaced: str | Sequence[str], reach: int = REACH) -> bool:
    """A word the term replaces stands within `reach` words of the target (found in any case, even inside a
    word): the plain translation left beside its term ("cartera billetera")."""
    words = [m.span() for m in WORDS.finditer(output)]
    folded = output.casefold()
    targets = [_word_range(words, m.start(), m.end()) for m in re.finditer(re.escape(target.casefold()), folded)]
    for a, b in _replaced_spans(output, target, replaced):
        r0, r1 = _word_range(words, a, b)
        if any(max(r0 - t1, t0 - r1) <= reach for t0, t1 in targets):
            return True
    return False


def determiner_disagrees(output: str, target: str, gender: str) -> bool:
    """The word right before an occurrence of the target (whole words, any case; only whitespace between) is a
    determiner that does not go with the term's gender/number: "el foto", "una ventanal", "los llave". `del`/`al`
    count as masculine singular, mi/tu/su/cada as singular and mis/tus/sus as plural of either gender; adjectives
    are not checked, a common-gender noun's determiner disagrees only in number, and a gender of `-` never
    disagrees."""
    if gender not in GENDERS[:-1]:
        return False
    wanted = COMMON.get(gender, (gender,))
    for start, _ in spans(output, target, ignore_case=True):
        before = re.search(r"([^\W_]+)\s+$", output[:start])
        if before and not set(wanted) & set(DETERMINERS.get(before.group(1).lower(), wanted)):
            return True
    return False


def words(text: str) -> list[str]:
    """The lower-case words of a text, in order."""
    return [w.lower() for w in WORDS.findall(text)]


def broken_words(output: str, reference: str, plain: str = "", targets: Sequence[str] = ()) -> list[str]:
    """Output words found in neither the reference nor the plain output (the known words) that are a known word of
    4+ letters with 1-2 letters stuck on, that word itself missing from the output ("autobúss" for "autobús",
    "sanitarios" for "sanitario"), or, right before or after one of `targets`, the first 2+ letters of a known word
    at least 2 letters longer ("aniver obsequio", "Car carpetas"): words a term broke. The plain output's own words
    (its inflections) are not counted."""
    known, out = set(words(reference)) | set(words(plain)), words(output)
    stuck = lambda w, r: len(r) >= 4 and w.startswith(r) and 1 <= len(w) - len(r) <= 2 and r not in out
    cut = lambda w, r: len(w) >= 2 and r.startswith(w) and len(r) - len(w) >= 2
    spans_ = [m.span() for m in WORDS.finditer(output)]
    beside = set()
    for target in targets:
        for m in re.finditer(re.escape(target.casefold()), output.casefold()):
            first, last = _word_range(spans_, m.start(), m.end())
            beside.update(i for i in (first - 1, last + 1) if 0 <= i < len(out))
    return [w for i, w in enumerate(out) if w not in known and
            (any(stuck(w, r) for r in known) or (i in beside and any(cut(w, r) for r in known)))]  # fmt: skip


def _places(text_words: list[str], phrase: str) -> list[int]:
    """Word indexes where the phrase's words start."""
    p = words(phrase)
    return [i for i in range(len(text_words) - len(p) + 1) if p and text_words[i : i + len(p)] == p]


def window_overlap(output: str, reference: str, target: str, reach: int = REACH) -> list[float]:
    """Per occurrence of the target in the reference: the share of the reference words within `reach` words either
    side of it that stand within `reach` words either side of the same occurrence in the output (0 where the
    output has fewer occurrences); occurrences with no words around them are left out."""
    ref, out, n = words(reference), words(output), len(words(target))
    ref_at, out_at = _places(ref, target), _places(out, target)
    scores = []
    for k, i in enumerate(ref_at):
        around = Counter(ref[max(0, i - reach) : i] + ref[i + n : i + n + reach])
        if not around:
            continue
        if k >= len(out_at):
            scores.append(0.0)
            continue
        j = out_at[k]
        got = Counter(out[max(0, j - reach) : j] + out[j + n : j + n + reach])
        scores.append(sum((around & got).values()) / sum(around.values()))
    return scores


def sentence_report(row: Row, output: str, plain: str) -> dict:
    """One sentence's metrics: per term and for the sentence."""
    terms = []
    for t in row.terms:
        need = row.needed(t)
        terms.append({
            "source": t.source, "target": t.target, "needed": need,
            "exact": min(need, count(output, t.target)), "any_case": min(need, count(output, t.target, True)),
            "plain_exact": min(need, count(plain, t.target)), "appears": appears(output, t.target),
            "whole": whole_word(output, t.target, ignore_case=True),
            "after_end": after_end(output, t.target, row.english),
            "appended": appended(output, t.target, plain),
            "beside": replaced_beside(output, t.target, t.leftovers),
            "kept": replaced_kept(output, t.target, t.leftovers),
            "determiner": determiner_disagrees(output, t.target, t.gender),
            "window": window_overlap(output, row.reference, t.target),
        })  # fmt: skip
    chrf = sacrebleu.sentence_chrf(output, [row.reference]).score
    chrf_plain = sacrebleu.sentence_chrf(plain, [row.reference]).score
    flags = {k: any(t[k] for t in terms) for k in ("after_end", "appended", "beside", "kept", "determiner")}
    broken = broken_words(output, row.reference, plain, [t.target for t in row.terms])
    return {
        "english": row.english, "reference": row.reference, "output": output, "plain": plain, "terms": terms,
        **flags, "broken": broken, "chrf": chrf, "chrf_plain": chrf_plain, "chrf_drop": chrf < chrf_plain - CHRF_DROP,
        "all_exact": all(t["exact"] == t["needed"] for t in terms),
    }  # fmt: skip


def _share(part: int | float, whole: int | float) -> float:
    """part / whole in percent (0 for nothing)."""
    return 100.0 * part / whole if whole else 0.0


def evaluate(rows: Sequence[Row], outputs: Sequence[str], plain_outputs: Sequence[str]) -> dict:
    """The corpus summary (percentages, chrF) and the per-sentence reports (`sentences`)."""
    if not len(rows) == len(outputs) == len(plain_outputs):
        raise ValueError("rows, outputs and plain_outputs must have the same length")
    reports = [sentence_report(r, o, p) for r, o, p in zip(rows, outputs, plain_outputs, strict=True)]
    terms = [t for s in reports for t in s["terms"]]
    needed = sum(t["needed"] for t in terms)
    present = [t for t in terms if t["appears"]]
    windows = [w for t in terms for w in t["window"]]
    refs = [[r.reference for r in rows]]
    n = len(reports)
    flagged = lambda s: any(s[k] for k in ("after_end", "appended", "beside", "kept", "determiner", "broken"))
    clean = [s for s in reports if s["all_exact"] and not (flagged(s) or s["chrf_drop"])]
    return {
        "sentences_n": n, "terms_n": needed,
        "term_exact": _share(sum(t["exact"] for t in terms), needed),
        "term_any_case": _share(sum(t["any_case"] for t in terms), needed),
        "plain_term_exact": _share(sum(t["plain_exact"] for t in terms), needed),
        "whole_word": _share(sum(t["whole"] for t in present), len(present)),
        "after_end": _share(sum(s["after_end"] for s in reports), n),
        "appended": _share(sum(s["appended"] for s in reports), n),
        "replaced_beside": _share(sum(s["beside"] for s in reports), n),
        "replaced_kept": _share(sum(s["kept"] for s in reports), n),
        "determiner": _share(sum(s["determiner"] for s in reports), n),
        "broken_words": _share(sum(bool(s["broken"]) for s in reports), n),
        "chrf": sacrebleu.corpus_chrf(list(outputs), refs).score,
        "chrf_plain": sacrebleu.corpus_chrf(list(plain_outputs), refs).score,
        "chrf_drop": _share(sum(s["chrf_drop"] for s in reports), n),
        "window_overlap": _share(sum(windows), len(windows)),
        "clean": _share(len(clean), n),
        "sentences": reports,
    }  # fmt: skip


LABELS = {
    "term_exact": "terms exact (whole words, as written) %", "term_any_case": "terms as whole words, any case %",
    "plain_term_exact": "terms exact without the glossary %", "whole_word": "whole words among terms present %",
    "after_end": "sentences with a term after the end %", "appended": "sentences, term appended to plain output %",
    "replaced_beside": "sentences, replaced word beside term %",
    "replaced_kept": "sentences, replaced word kept %", "determiner": "sentences, determiner disagrees %",
    "broken_words": "sentences with a broken word %", "chrf": "chrF with terms", "chrf_plain": "chrF without",
    "chrf_drop": f"sentences chrF > {CHRF_DROP:g} below plain %", "window_overlap": "window overlap %",
    "clean": "sentences clean (terms exact, no flag, no chrF drop) %",
}  # fmt: skip


def table(results: dict[str, dict]) -> str:
    """Summaries side by side as a markdown table: one column per named run."""
    names = list(results)
    lines = ["| metric | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    first = results[names[0]]
    counts = [f"{r['sentences_n']} / {r['terms_n']}" for r in results.values()]
    lines.append("| sentences / terms | " + " | ".join(counts) + " |")
    for key, label in LABELS.items():
        if key in first:
            lines.append(f"| {label} | " + " | ".join(f"{r[key]:.1f}" for r in results.values()) + " |")
    return "\n".join(lines)


def problems(rows: Sequence[Row]) -> list[str]:
    """What is wrong with a set: a row's shape, a source missing from its English, a target not in its reference as
    often as needed, a replaced word in the reference, a source with two targets, a glossary term in a sentence
    that the row does not list."""
    out = []
    entries: dict[str, str] = {}
    for n, row in enumerate(rows, 1):
        where = f"row {n} ({row.english!r})"
        if row.split not in SPLITS:
            out.append(f"{where}: split {row.split!r}")
        if not 1 <= len(row.terms) <= 3:
            out.append(f"{where}: {len(row.terms)} terms")
        if not 4 <= len(row.english.split()) <= 20:
            out.append(f"{where}: {len(row.english.split())} words")
        for t in row.terms:
            need = row.needed(t)
            if need == 0:
                out.append(f"{where}: source {t.source!r} not in the English")
            if (got := count(row.reference, t.target)) != need:
                out.append(f"{where}: target {t.target!r} {got}x in the reference, {need} needed")
            if t.gender not in GENDERS or (t.verbatim and t.gender != "-"):
                out.append(f"{where}: gender {t.gender!r} of {t.source!r}")
            for r in t.leftovers:
                if count(row.reference, r, ignore_case=True) or count(t.target, r, ignore_case=True):
                    out.append(f"{where}: replaced {r!r} in the reference or the target")
            source, target = row.entry(t)
            if entries.setdefault(source.casefold(), target) != target:
                out.append(f"{where}: {source!r} -> {target!r}, elsewhere {entries[source.casefold()]!r}")
    listed = Counter(r.english for r in rows)
    out += [f"{en!r} twice" for en, k in listed.items() if k > 1]
    keys = sorted(entries, key=len, reverse=True)
    pattern = re.compile("|".join(_pattern(k) for k in keys)) if keys else None
    for n, row in enumerate(rows, 1):
        found = {m.group().casefold() for m in pattern.finditer(row.english.casefold())} if pattern else set()
        found = {" ".join(f.split()) for f in found}
        if found != {t.source.casefold() for t in row.terms}:
            out.append(f"row {n} ({row.english!r}): the glossary matches {sorted(found)}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Check the sets, or score a JSON file of outputs: {"outputs": [...], "plain": [...]} for a set's rows."""
    p = argparse.ArgumentParser(prog="python -m bench.glossary_quality", description=__doc__.split("\n\n")[0])
    p.add_argument("outputs", nargs="?", type=Path, help='JSON {"outputs": [...], "plain": [...]}; none: check')
    p.add_argument("--set", choices=list(SETS), default="eval")
    p.add_argument("--split", default=None, help="dev, test, check or short (default: every row of the set)")
    args = p.parse_args(argv)
    rows = read(SETS[args.set], args.split)
    if args.outputs is None:
        found = [f"{name}: {p}" for name, path in SETS.items() for p in problems(read(path))]
        print("\n".join(found) or "ok: " + ", ".join(f"{len(read(path))} {name} rows" for name, path in SETS.items()))
        return 1 if found else 0
    got = json.loads(args.outputs.read_text(encoding="utf-8"))
    summary = evaluate(rows, got["outputs"], got["plain"])
    print(table({"outputs": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
