"""Every client shape LibreTranslate accepts, over HTTP against the real server: fields in the query string, a form,
multipart or JSON; LibreTranslate's frontend endpoints; detection that tells the truth; hostile bodies."""

from __future__ import annotations

import httpx
import pytest

from bench.harness.client import HTTP
from tests.app.test_errors import check_error

TEXT = "the cat sleeps"
FIELDS = {"q": TEXT, "source": "en", "target": "es", "api_key": "x", "unknown_field": "ignored"}
SPANISH = "Hoy hace muy buen tiempo y vamos a la playa con los niños."
GERMAN = "Der Hund schläft im Garten."


def shapes(url: str, path: str, fields: dict) -> dict[str, httpx.Response]:
    """The same fields sent in each shape."""
    return {
        "query": HTTP.post(url + path, params=fields, timeout=30),
        "form": HTTP.post(url + path, data=fields, timeout=30),
        "multipart": HTTP.post(url + path, data=fields, files={"unused": ("a.txt", b"x")}, timeout=30),
        "json": HTTP.post(url + path, json=fields, timeout=30),
    }


def test_translate_reads_every_shape(server):
    """Query string (no body), urlencoded, multipart and JSON give the same answer; api_key and unknown fields are
    ignored when no keys are configured."""
    answers = shapes(server.url, "/translate", FIELDS)
    for shape, r in answers.items():
        assert r.status_code == 200, (shape, r.text)
    assert len({r.json()["translatedText"] for r in answers.values()}) == 1
    assert "multipart/form-data" in answers["multipart"].request.headers["content-type"]


def test_unescaped_utf8_form_is_read_as_utf8(server):
    """A urlencoded body with raw UTF-8 (curl -d 'target=ñ') reads as UTF-8, as LibreTranslate's Flask reads it."""
    raw = "q=x&source=en&target=ñ".encode()
    ctype = {"content-type": "application/x-www-form-urlencoded"}
    r = HTTP.post(server.url + "/translate", content=raw, headers=ctype, timeout=30)
    assert r.status_code == 400 and r.json()["error"].startswith("ñ is not supported as a target"), r.text


def test_query_string_and_body_merge(server):
    """Fields may be split between the query string and the body; the body wins."""
    r = HTTP.post(server.url + "/translate?target=es&source=en", data={"q": TEXT}, timeout=30)
    assert r.status_code == 200, r.text
    r = HTTP.post(server.url + "/translate?target=xx", json={"q": TEXT, "source": "en", "target": "es"}, timeout=30)
    assert r.status_code == 200, r.text


def test_repeated_q_in_the_query_string_is_a_list(server):
    """q=a&q=b answers a list, as a form does."""
    r = HTTP.post(
        server.url + "/translate", params=[("q", "a cat"), ("q", "a dog"), ("source", "en"), ("target", "es")]
    )
    assert r.status_code == 200 and len(r.json()["translatedText"]) == 2


def test_detect_reads_every_shape(server):
    """/detect in every shape, `all_languages` as a string where forms send strings: the same detections."""
    answers = shapes(server.url, "/detect", {"q": GERMAN, "api_key": "x", "extra": 1, "all_languages": "true"})
    assert len({str(r.json()) for r in answers.values()}) == 1
    assert answers["query"].json()[0]["language"] == "de"


def test_detect_ranks_the_served_sources_and_all_when_asked(server):
    """/detect ranks among the served sources (en alone here: no detection, confidence 100), as LibreTranslate among
    its installed languages; `all_languages` ranks every language the detector knows (the issue's sentences: Spanish
    and German, neither a source of the en-es model)."""
    for text, language in ((SPANISH, "es"), (GERMAN, "de")):
        assert HTTP.post(server.url + "/detect", json={"q": text}).json() == [{"language": "en", "confidence": 100}]
        best = HTTP.post(server.url + "/detect", json={"q": text, "all_languages": True}).json()[0]
        assert best["language"] == language and best["confidence"] > 90


@pytest.mark.parametrize("text", ["Hello world", "Hello", "Thanks", GERMAN])
def test_auto_with_one_served_source_needs_no_detection(server, text):
    """source auto into es on the en-es model: en, the only source served into es, without detection (the issue's
    "Hello world" was refused as `fuv`); the same translation as source en."""
    r = HTTP.post(server.url + "/translate", json={"q": text, "source": "auto", "target": "es"})
    assert r.status_code == 200, r.text
    assert r.json()["detectedLanguage"] == {"language": "en", "confidence": 100}
    explicit = HTTP.post(server.url + "/translate", json={"q": text, "source": "en", "target": "es"}).json()
    assert r.json()["translatedText"] == explicit["translatedText"]


def test_frontend_settings(server):
    """LibreTranslate's /frontend/settings keys and values."""
    settings = HTTP.get(server.url + "/frontend/settings").json()
    assert settings["charLimit"] == -1 and settings["apiKeys"] is False and settings["keyRequired"] is False
    assert settings["suggestions"] is False and settings["frontendTimeout"] == 500
    assert settings["language"] == {"source": {"code": "auto", "name": "Auto Detect"},
                                    "target": {"code": "es", "name": "Spanish"}}  # fmt: skip
    assert settings["filesTranslation"] is True
    formats = {".txt", ".docx", ".odt", ".pptx", ".epub", ".srt", ".po", ".xlf", ".html"}
    assert formats <= set(settings["supportedFilesFormat"])


def test_suggest_is_off(server):
    """POST /suggest: 403 with LibreTranslate's message."""
    r = HTTP.post(server.url + "/suggest", data={"q": "a", "s": "b", "source": "en", "target": "es"})
    assert check_error(r, 403, "forbidden") == "Suggestions are disabled on this server."


def test_libretranslatepy_sees_both_languages(server):
    """libretranslatepy: es is listed (a target); detection answers among the served sources (en); its `auto`
    translates "Hello world" as from en (the issue's call was an HTTP 400)."""
    from libretranslatepy import LibreTranslateAPI

    lt = LibreTranslateAPI(server.url + "/")
    assert {x["code"]: x["targets"] for x in lt.languages()} == {"en": ["es"], "es": []}
    assert lt.detect(SPANISH)[0]["language"] == "en"
    assert lt.translate(TEXT, "en", "es") == HTTP.post(server.url + "/translate", json=FIELDS).json()["translatedText"]
    assert lt.translate("Hello world", "auto", "es") == lt.translate("Hello world", "en", "es")


@pytest.mark.parametrize("where", ["json", "form-parameters"])
def test_deeply_nested_json_is_a_422(server, where):
    """100,000 nested brackets: a clear 422 naming the field, not a 500; the server goes on."""
    deep = "[" * 100_000 + "]" * 100_000
    if where == "json":
        r = HTTP.post(
            server.url + "/translate", content=f'{{"q": {deep}}}', headers={"content-type": "application/json"}
        )
        check_error(r, 422, "validation", "body", "nested")
    else:
        r = HTTP.post(server.url + "/translate", data={"q": TEXT, "source": "en", "target": "es", "parameters": deep})
        check_error(r, 422, "validation", "parameters", "nested")
    assert HTTP.post(server.url + "/translate", json=FIELDS, timeout=30).status_code == 200
