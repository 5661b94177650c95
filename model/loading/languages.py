"""Language codes: a checkpoint's own (`spa_Latn`, `__es__`, `es_XX`, `>>es<<`) mapped to the API's (ISO 639-1, as
LibreTranslate), and the languages a checkpoint serves with the tokens that select them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from iso639 import Lang
from iso639.exceptions import DeprecatedLanguageValue, InvalidLanguageValue

UNKNOWN = (InvalidLanguageValue, DeprecatedLanguageValue)

# The one table of exceptions to what ISO 639 says: individual languages that stand for their macrolanguage's
# ISO 639-1 code in NLLB, OPUS-MT and M2M100 (arb is "ar", not Moroccan or Egyptian Arabic), and LibreTranslate's
# own codes.
STANDARD_VARIETIES = frozenset(
    "arb zsm lvs ekk pes npi swh azj khk uzn ydd gaz als ory quy plt kmr cmn fuv knc ayr".split()
)
SPECIAL = {"zho_Hant": "zt", "cmn_Hant": "zt", "pt_br": "pb", "pt_BR": "pb"}
NAMES = {"zt": "Chinese (Traditional)", "pb": "Portuguese (Brazil)", "mul": "Multiple languages"}
TOKEN = re.compile(  # >>es<< (OPUS-MT), __es__ (M2M100), spa_Latn (NLLB), es_XX (mBART-50)
    r"^(?:>>(?P<marian>[\w-]+)<<|__(?P<m2m>[a-z]{2,3})__|(?P<tag>[a-z]{2,3})_(?P<sub>[A-Z][a-z]{3}|[A-Z]{2}))$"
)


def iso(lang: str) -> str:
    """ISO 639-1 code of a 2/3-letter code when it has one (or its standard variety's macrolanguage has), else as is."""
    try:
        found = Lang(lang)
    except UNKNOWN:
        return lang
    if not found.pt1 and lang in STANDARD_VARIETIES and found.macro() is not None:
        return found.macro().pt1 or lang
    return found.pt1 or found.pt3 or lang


def split_token(token: str) -> tuple[str, str] | None:
    """A language token's (language, script or region): `spa_Latn` -> (spa, Latn); None when it names no language."""
    match = TOKEN.match(token)
    if match is None:
        return None
    if match["marian"]:
        lang, _, sub = match["marian"].partition("_")
        return (lang, sub) if re.fullmatch(r"[a-z]{2,3}", lang) else None
    return (match["m2m"], "") if match["m2m"] else (match["tag"], match["sub"])


def api_codes(tokens: Iterable[str]) -> dict[str, str]:
    """API code -> checkpoint token for every language token, in order: the first token of a language takes its ISO
    code, later ones (other scripts) take `code-Script`, then their own code."""
    out: dict[str, str] = {}
    for token in tokens:
        parts = split_token(token)
        if parts is None:
            continue
        lang, sub = parts
        raw = token.strip("<>_")
        candidates = [SPECIAL.get(raw) or iso(lang), f"{iso(lang)}-{sub}" if sub else lang, raw]
        code = next((c for c in candidates if c and c not in out), None)
        if code is not None:
            out[code] = token
    return out


def language_name(code: str) -> str:
    """English name of an API code ("es" -> "Spanish"); the code itself when unknown."""
    if code in NAMES:
        return NAMES[code]
    lang, _, sub = code.partition("-")
    try:
        name = Lang(lang).name
    except UNKNOWN:
        return code
    return f"{name} ({sub})" if sub else name


@dataclass(frozen=True)
class Languages:
    """The pairs a checkpoint serves (API codes) and the tokens that select them: a target token prepended to the
    source (multi-target OPUS-MT), or a source token prepended and the target token forced as the first output
    (NLLB, M2M100, mBART-50)."""

    sources: tuple[str, ...]
    targets: tuple[str, ...]
    tokens: Mapping[str, int] = field(default_factory=dict)  # API code -> language token id
    forced: bool = False  # True: source token first, target token forced; False: target token first (if any)

    def serves(self, source: str, target: str) -> bool:
        """Whether source -> target is one of this checkpoint's pairs."""
        return source in self.sources and target in self.targets and source != target

    def pairs(self) -> list[tuple[str, str]]:
        """Every (source, target) served."""
        return [(s, t) for s in self.sources for t in self.targets if s != t]

    def prefix(self, source: str, target: str) -> list[int]:
        """Token ids that go before the source text for this pair."""
        if self.forced:
            return [self.tokens[source]]
        return [self.tokens[target]] if target in self.tokens else []

    def forced_bos(self, target: str) -> int | None:
        """The token forced as the first output for this target (None when the checkpoint forces none)."""
        return self.tokens[target] if self.forced else None

    @property
    def source(self) -> str:
        """The source language, or "mul" when there are several."""
        return self.sources[0] if len(self.sources) == 1 else "mul"

    @property
    def target(self) -> str:
        """The target language, or "mul" when there are several."""
        return self.targets[0] if len(self.targets) == 1 else "mul"
