"""The grammatical gender of a target-language noun, from a morphological analyser installed on the machine where
there is one: Apertium's `lt-proc` with a Debian `apertium-*` package's analyser (Spanish: `apertium-eng-spa`).
A small model knows the gender of the words it saw often; a glossary's terms are often the words it saw least
("un ventanal", "la sartén"), which a dictionary of tens of thousands of nouns knows."""

from __future__ import annotations

import functools
import logging
import re
import select
import shutil
import subprocess
import threading
from pathlib import Path

log = logging.getLogger(__name__)

ANALYSERS: dict[str, tuple[str, ...]] = {  # where Debian's packages put each language's analyser
    "es": ("/usr/share/apertium/apertium-eng-spa/spa-eng.automorf.bin",),
    "en": ("/usr/share/apertium/apertium-eng-spa/eng-spa.automorf.bin",),
}
WORD = re.compile(r"[^\W\d_]+")  # letters only: the analyser's stream format gives ^ $ / < > @ [ ] meanings
NOUN = re.compile(r"<n><(m|f|mf)>")
AGREEING = re.compile(r"<(?:adj|vblex><pp)>(?:<sup>)?<(m|f)><(sg|pl)>")
TIMEOUT_S = 2.0


class Lexicon:
    """One language's analyser, kept running (`lt-proc -z`: a NUL-ended word in, its NUL-ended analyses out), its
    answers cached. A failing analyser answers "" from then on (the model and the word's ending decide)."""

    def __init__(self, analyser: Path, program: str = "lt-proc"):
        self.lock, self.broken, self.path = threading.Lock(), False, analyser
        self.proc = subprocess.Popen([program, "-z", str(analyser)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)  # fmt: skip

    def gender(self, word: str) -> str:
        """The word's gender, m or f, where the analyser knows it as a noun of one gender; "" where it does not know
        it, knows it as both ("el/la gerente") or not as a noun."""
        genders = set(NOUN.findall(self._analyses(word)))
        return genders.pop() if len(genders) == 1 and genders != {"mf"} else ""

    def number(self, word: str) -> str:
        """The word's number as the analyser knows it as a noun: "pl" ("imágenes", "descargas" beside the verb's
        "descargas"), "sg", "sp" (both: "lunes"), or "" where it does not know the word ("imagenes", a plural made by
        rule that is none), knows it only as another word ("ajustes": a verb's form, singular) or as a noun of both
        numbers."""
        nouns = [reading for reading in self._analyses(word).split("/") if "<n>" in reading]
        numbers = set(re.findall(r"<(sg|pl|sp)>", "".join(nouns)))
        return numbers.pop() if len(numbers) == 1 else ""

    def noun(self, word: str) -> bool | None:
        """Whether the analyser knows the word as a noun (True), only as other words ("permitir": False), or not at
        all (None: a rare word, most glossary terms)."""
        analyses = self._analyses(word)
        return None if _unknown(analyses) else "<n>" in analyses

    def plural_noun(self, term: str) -> bool:
        """Whether the last word of a term can be a plural noun (or the analyser does not know it): "updates" yes,
        "allows" no (a verb only)."""
        analyses = self._analyses(term.split()[-1] if term.split() else "")
        return _unknown(analyses) or "<n><pl>" in analyses

    def agrees(self, word: str) -> bool:
        """Whether the analyser knows the word as an adjective or a participle (it agrees with the noun before it:
        "disco duro", "correo no deseado"; not "sitio web")."""
        analyses = self._analyses(word)
        return "<adj>" in analyses or "<pp>" in analyses

    def agreeing(self, word: str, only: bool = True) -> tuple[str, str] | None:
        """The gender and number ("m"/"f", "sg"/"pl") of a word read as an adjective or a participle of one gender
        and number ("aparcada": f, sg); None for any other ("verde" is both genders), for one that can be another
        word too ("solo" an adverb, "bajo" a preposition) and, `only`, for one that can be a verb or an interjection
        too ("llena": after "es" it is not; "bueno": after "es muy" it is no interjection)."""
        readings = self._analyses(word).rstrip("$\0").split("/")[1:]
        found = [AGREEING.search(r) for r in readings]
        forms = {m.groups() for m in found if m}
        others = [r for r, m in zip(readings, found, strict=True)
                  if not m and (only or ("<vblex>" not in r and "<ij>" not in r))]  # fmt: skip
        if len(forms) != 1 or others:
            return None
        return forms.pop()

    @functools.lru_cache(maxsize=65536)  # noqa: B019 (one Lexicon per language, kept for the process's life)
    def _analyses(self, word: str) -> str:
        """The analyser's answer for a word of letters (lowered), "" for anything else."""
        return self._analyse(word.lower()) if WORD.fullmatch(word) else ""

    def _analyse(self, word: str) -> str:
        """The analyser's answer for one word ("^sartén/sartén<n><f><sg>$"), or "" once it failed."""
        with self.lock:
            if self.broken:
                return ""
            try:
                self.proc.stdin.write(word.encode() + b"\0")
                self.proc.stdin.flush()
                out = b""
                while not out.endswith(b"\0"):
                    if not select.select([self.proc.stdout], [], [], TIMEOUT_S)[0]:
                        raise TimeoutError(f"no answer in {TIMEOUT_S} s")
                    chunk = self.proc.stdout.read1(4096)
                    if not chunk:
                        raise EOFError("the analyser exited")
                    out += chunk
                return out.decode(errors="replace")
            except (OSError, ValueError, TimeoutError, EOFError) as e:
                log.warning("morphological analyser failed (%s): genders from the model and word endings only", e)
                self.broken = True
                self.proc.kill()
                return ""


def _unknown(analyses: str) -> bool:
    """An answer that knows nothing of its word ("", or the analyser's "*" mark)."""
    return not analyses or "/*" in analyses


@functools.cache
def lexicon(language: str) -> Lexicon | None:
    """The language's lexicon where `lt-proc` and one of its analysers are installed, else None."""
    program = shutil.which("lt-proc")
    found = next((Path(p) for p in ANALYSERS.get(language, ()) if Path(p).is_file()), None)
    if program is None or found is None:
        return None
    log.info("genders of %s glossary terms from the analyser %s", language, found)
    return Lexicon(found, program)
