"""Languages the server serves, and detecting a text's language among every language the detector knows (py3langid:
its model ships inside the package, nothing is downloaded)."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from model.loading.languages import language_name

ALIASES = {"zt": "zh", "pb": "pt"}  # API codes whose language the detector knows under another code
TOP = 3  # candidates /detect returns per text


class Detector:
    """Language identification restricted to candidate API codes; the model loads once, on first use or load()."""

    def __init__(self):
        self._identifier = None
        self._lock = threading.Lock()

    def load(self) -> Detector:
        """Load py3langid's model (about a second; done while the server loads its models)."""
        with self._lock:
            if self._identifier is None:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier

                self._identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return self

    @property
    def loaded(self) -> bool:
        """The model is loaded (readiness waits for it)."""
        return self._identifier is not None

    def labels(self, codes: Iterable[str]) -> dict[str, str]:
        """Detector label -> API code for the codes the detector knows (the first code of a label wins)."""
        known = set(self.load()._identifier.labels)
        out: dict[str, str] = {}
        for code in codes:
            label = ALIASES.get(code, code.split("-")[0])
            if label in known:
                out.setdefault(label, code)
        return out

    def rank(self, text: str, top: int = TOP) -> list[dict]:
        """LibreTranslate's answer for one text: [{"language", "confidence"}] best first, over every language the
        detector knows, confidence in percent (its probability, normalised over all of them)."""
        ranked = self.load()._identifier.rank(text)[:top]
        return [{"language": label, "confidence": round(100 * p, 2)} for label, p in ranked]

    def among(self, text: str, codes: list[str]) -> dict:
        """The language of `text` as {"language", "confidence"}: the API code of `codes` it is detected as, else the
        detector's own label (the caller refuses it); the only code, at confidence 0, when the detector knows none of
        `codes` (e.g. "mul")."""
        labels = self.labels(codes)
        if not labels and len(codes) == 1:
            return {"language": codes[0], "confidence": 0.0}
        best = self.rank(text, top=1)[0]
        return {**best, "language": labels.get(best["language"], best["language"])}


def listing(pairs: Iterable[tuple[str, str]]) -> list[dict]:
    """GET /languages, as LibreTranslate answers: every language that is a source or a target, with its name and the
    targets it translates into (an empty list for a target-only language)."""
    targets: dict[str, set[str]] = {}
    for source, target in pairs:
        targets.setdefault(source, set()).add(target)
        targets.setdefault(target, set())
    return [{"code": c, "name": language_name(c), "targets": sorted(t)} for c, t in sorted(targets.items())]
