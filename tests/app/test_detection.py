"""`source: "auto"` and /detect on a server of several sources (the families server: the built-in en-es, a
multi-target OPUS-MT en-fr/it, an NLLB of en es fr de zh): detection ranks only the sources served into the target,
what people type first gets the right one, the DeepL and LibreTranslate clients' default calls work, and an unserved
pair says which side and which pairs, in both dialects."""

from __future__ import annotations

import pytest

from bench.harness.client import HTTP
from tests.app.test_errors import check_error

ENGLISH = ["Hello world", "Hello", "Thanks", "hello world", "HELLO WORLD", "Good morning"]
SPANISH = ["Hola mundo", "Buenos días", "Muchas gracias", "Hasta luego", "Buenas noches", "¿Qué tal?"]
SHORT = {"max_new_tokens": 8}  # the tiny NLLB's outputs are noise: keep them short


def post(url: str, path: str = "/translate", **body) -> dict:
    """POST a JSON body and insist on 200."""
    r = HTTP.post(url + path, json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize(("texts", "target", "language"), [(ENGLISH, "es", "en"), (SPANISH, "en", "es")])
def test_auto_gets_the_right_source_on_short_texts(families, texts, target, language):
    """Greetings into es are English (among en, de, fr, zh served into es), two Spanish words into en are Spanish
    (among es, de, fr, zh), each with its confidence; the answer is the explicit source's. Catches detection among
    every language (the issue's "Hello world" detected as fuv) and a wrong candidate list."""
    for text in texts:
        got = post(families.url, q=text, source="auto", target=target, parameters=SHORT)
        assert got["detectedLanguage"]["language"] == language, (text, got["detectedLanguage"])
        assert 50 < got["detectedLanguage"]["confidence"] <= 100
        explicit = post(families.url, q=text, source=language, target=target, parameters=SHORT)
        assert (got["translatedText"], got["details"]["model"]) == (explicit["translatedText"],
                                                                    explicit["details"]["model"])  # fmt: skip


def test_only_the_sources_served_into_the_target_are_ranked(families):
    """Into it only en is served (OPUS-MT en-it): a Spanish text is taken as en without detection (confidence 100);
    into fr, where es is served too (NLLB), it is es."""
    into_it = post(families.url, q="Buenos días", source="auto", target="it", parameters=SHORT)
    assert into_it["detectedLanguage"] == {"language": "en", "confidence": 100}
    into_fr = post(families.url, q="Buenos días", source="auto", target="fr", parameters=SHORT)
    assert into_fr["detectedLanguage"]["language"] == "es"


def test_detect_ranks_served_sources_unless_asked_for_all(families):
    """/detect: "Hello world" is en among the served sources; with all_languages, Portuguese (served only as a
    target) is pt."""
    sources = {x["code"] for x in HTTP.get(families.url + "/languages").json() if x["targets"]}
    ranked = post(families.url, "/detect", q="Hello world")
    assert ranked[0]["language"] == "en" and {d["language"] for d in ranked} <= sources
    portuguese = "Obrigado pela ajuda"
    assert post(families.url, "/detect", q=portuguese)[0]["language"] in sources - {"pt"}
    assert post(families.url, "/detect", q=portuguese, all_languages=True)[0]["language"] == "pt"


def test_the_clients_default_calls(families):
    """The DeepL client's translate_text with no source_lang, and libretranslatepy's "auto": English and Spanish
    phrases get their language and the explicit source's translation."""
    deepl = pytest.importorskip("deepl")
    from libretranslatepy import LibreTranslateAPI

    deepl.http_client.max_network_retries = 0
    translator = deepl.Translator("any-key", server_url=families.url)
    hello = translator.translate_text("Hello world", target_lang="ES")
    assert hello.detected_source_lang == "EN"
    assert hello.text == translator.translate_text("Hello world", source_lang="EN", target_lang="ES").text
    hola = translator.translate_text("Hola mundo", target_lang="EN-US")
    assert hola.detected_source_lang == "ES"
    lt = LibreTranslateAPI(families.url + "/")
    assert lt.translate("Hello world", "auto", "es") == lt.translate("Hello world", "en", "es")
    assert lt.detect("Buenos días")[0]["language"] == "es"


def test_unserved_pair_names_the_side_and_the_pairs(families):
    """fr and it are both served, but not fr->it: LibreTranslate's dialect says so, with fr's targets and where to
    find the pairs (too many to list); DeepL's names target_lang, the source and the pairs."""
    r = HTTP.post(families.url + "/translate", json={"q": "Bonjour", "source": "fr", "target": "it"})
    message = check_error(r, 400, "unsupported_language", "fr translates into", "see GET /languages")
    assert message.startswith("fr-it is not supported")
    r = HTTP.post(families.url + "/v2/translate", json={"text": ["Bonjour"], "source_lang": "FR", "target_lang": "IT"})
    assert r.status_code == 400, r.text
    assert r.json()["message"].startswith("Value for 'target_lang' not supported: IT from source_lang FR")
    assert "served pairs:" in r.json()["message"]
