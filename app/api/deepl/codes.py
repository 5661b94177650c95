"""Language codes as DeepL writes them (upper case, target variants such as EN-GB and PT-BR) and the served models'
API codes ("en", "pb", "zt"): a DeepL code maps to the first of its candidates a model serves, a variant the models
cannot tell apart falling back to its base language."""

from __future__ import annotations

from collections.abc import Iterable

from model.loading.languages import language_name

# DeepL target variants -> the served codes that can answer them, most specific first (the base language last)
VARIANTS: dict[str, tuple[str, ...]] = {
    "EN-GB": ("en-gb", "en"),
    "EN-US": ("en-us", "en"),
    "PT-BR": ("pt-br", "pb", "pt"),
    "PT-PT": ("pt-pt", "pt"),
    "ES-419": ("es-419", "es"),
    "ZH-HANS": ("zh-hans", "zh"),
    "ZH-HANT": ("zh-hant", "zt", "zh"),
}
# a served target -> the DeepL codes it answers (DeepL lists EN and PT targets only as their variants)
LISTED: dict[str, tuple[str, ...]] = {
    "en": ("EN-GB", "EN-US"),
    "pt": ("PT-BR", "PT-PT"),
    "pb": ("PT-BR",),
    "es": ("ES", "ES-419"),
    "zh": ("ZH", "ZH-HANS", "ZH-HANT"),
    "zt": ("ZH-HANT",),
}
BASE = {"pb": "PT", "zt": "ZH"}  # served codes whose DeepL source code is another language's
NAMES = {
    "EN-GB": "English (British)",
    "EN-US": "English (American)",
    "PT-BR": "Portuguese (Brazilian)",
    "PT-PT": "Portuguese (European)",
    "ES-419": "Spanish (Latin American)",
    "ZH-HANS": "Chinese (simplified)",
    "ZH-HANT": "Chinese (traditional)",
}


def deepl_code(served: str) -> str:
    """The DeepL source code of a served language ("en" -> "EN", "pb" -> "PT", "zt" -> "ZH")."""
    return BASE.get(served, served.split("-")[0].upper())


def served_code(code: str, served: Iterable[str]) -> str | None:
    """The served language a DeepL code (any case) asks for: the first of its candidates served, else None."""
    upper = code.strip().upper()
    served = set(served)
    candidates = VARIANTS.get(upper, (upper.lower(), upper.split("-")[0].lower()))
    candidates += tuple(s for s in sorted(served) if deepl_code(s) == upper)  # "PT" -> "pb" when only it is served
    return next((c for c in candidates if c in served), None)


def pairs(served: list[tuple[str, str]]) -> str:
    """The served pairs in DeepL's base codes for a message ("EN->ES, ES->EN"), or how many when many."""
    if len(served) > 20:
        return f"{len(served)} pairs, see GET /v2/languages"
    return ", ".join(dict.fromkeys(f"{deepl_code(s)}->{deepl_code(t)}" for s, t in served))


def name(code: str) -> str:
    """DeepL's English name of a DeepL code."""
    return NAMES.get(code) or language_name(code.lower())


def sources(served: Iterable[str]) -> list[dict]:
    """GET /v2/languages?type=source: [{"language": "EN", "name": "English"}], one per DeepL code."""
    codes = sorted({deepl_code(s) for s in served})
    return [{"language": c, "name": name(c)} for c in codes]


def targets(served: Iterable[str]) -> list[dict]:
    """GET /v2/languages?type=target: the DeepL codes the served targets answer; no model here can honour
    `formality`, so none supports it."""
    codes = sorted({c for s in served for c in LISTED.get(s, (s.upper(),))})
    return [{"language": c, "name": name(c), "supports_formality": False} for c in codes]
