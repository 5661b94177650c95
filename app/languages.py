"""Languages the server serves, and detecting a text's language among them (py3langid: its model ships inside the
package, nothing is downloaded)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from app.errors import ApiError
from app.text import Layout
from model.languages import language_name

if TYPE_CHECKING:
    from app.service import Service

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

    def rank(self, text: str, candidates: Iterable[str]) -> list[dict]:
        """LibreTranslate's answer for one text: [{"language", "confidence"}] best first, confidence in percent,
        renormalised over the candidates the detector knows (empty when it knows none)."""
        labels = self.labels(candidates)
        scores = [(labels[label], p) for label, p in self.load()._identifier.rank(text) if label in labels]
        total = sum(p for _, p in scores) or 1.0
        return [{"language": code, "confidence": round(100 * p / total, 2)} for code, p in scores[:TOP]]


def listing(pairs: Iterable[tuple[str, str]]) -> list[dict]:
    """GET /languages: every source with its name and the targets it translates into."""
    targets: dict[str, set[str]] = {}
    for source, target in pairs:
        targets.setdefault(source, set()).add(target)
    return [{"code": c, "name": language_name(c), "targets": sorted(t)} for c, t in sorted(targets.items())]


def detect_source(service: Service, layouts: list[Layout], target: str) -> dict:
    """source "auto": the language of all texts together among the sources that translate into `target`."""
    candidates = service.sources_into(target)
    if not candidates:
        why = f"source 'auto' with target '{target}': no model translates into it"
        raise ApiError(400, "unsupported_language", why)
    ranked = service.detector.rank(" ".join(u for lay in layouts for u in lay.units), candidates)
    if ranked:
        return ranked[0]
    if len(candidates) == 1:  # a source the detector does not know (e.g. "mul"): the only one that fits
        return {"language": candidates[0], "confidence": 0.0}
    raise ApiError(400, "unsupported_language", f"source 'auto': cannot tell which of {candidates} it is; set source")
