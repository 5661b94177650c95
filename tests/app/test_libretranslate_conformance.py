"""The LibreTranslate dialect to the letter: every check of LibreTranslate's own API tests
(libretranslate/tests/test_api in its repository: status codes, exact error texts, the shapes its clients read),
sent over HTTP to the real server as a new user would, with form and JSON bodies as those tests send them."""

from __future__ import annotations

import pytest

from bench.harness.client import HTTP

FORM = {"q": "Hello", "source": "en", "target": "es", "format": "text"}


def test_translate_form(server):
    r = HTTP.post(server.url + "/translate", data=FORM, timeout=30)
    assert r.status_code == 200 and "translatedText" in r.json()


def test_translate_batch_json(server):
    r = HTTP.post(server.url + "/translate", json={**FORM, "q": ["Hello", "World"]}, timeout=30)
    assert r.status_code == 200
    assert isinstance(r.json()["translatedText"], list) and len(r.json()["translatedText"]) == 2


@pytest.mark.parametrize("send", ["data", "json"])
def test_translate_unsupported_target_is_named_as_libretranslate_names_it(server, send):
    """LibreTranslate's exact words first (its clients show the message as is), then the side and the pairs served
    (LibreTranslate's own test compares the whole text: the one check this server answers with more). Catches a
    message reworded or a status other than 400."""
    r = HTTP.post(server.url + "/translate", **{send: {**FORM, "target": "zz"}}, timeout=30)
    assert r.status_code == 400 and r.json()["error"] == "zz is not supported as a target; served pairs: en-es"


def test_translate_unsupported_source(server):
    r = HTTP.post(server.url + "/translate", data={**FORM, "source": "zz"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"] == "zz is not supported as a source; served pairs: en-es"


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({k: v for k, v in FORM.items() if k != "q"}, "q"),
        ({**FORM, "q": ""}, "q"),
        ({k: v for k, v in FORM.items() if k != "target"}, "target"),
    ],
    ids=["missing-q", "empty-q", "missing-target"],
)
@pytest.mark.parametrize("send", ["data", "json"])
def test_translate_missing_parameter(server, fields, name, send):
    """A missing (or empty) field is a 400 with LibreTranslate's text, not a 422."""
    r = HTTP.post(server.url + "/translate", **{send: fields}, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["error"] == f"Invalid request: missing {name} parameter"


def test_detect(server):
    r = HTTP.post(server.url + "/detect", data={"q": "Hello"}, timeout=30)
    assert r.status_code == 200
    assert len(r.json()) >= 1 and {"confidence", "language"} <= set(r.json()[0])


def test_detect_without_fields_is_a_400(server):
    """No body at all (no content type either): 400 naming q, not a 422 about the body."""
    r = HTTP.post(server.url + "/detect", timeout=30)
    assert r.status_code == 400 and r.json()["error"] == "Invalid request: missing q parameter"


def test_languages(server):
    r = HTTP.get(server.url + "/languages")
    assert r.status_code == 200 and {"code", "name"} <= set(r.json()[0])


def test_frontend_settings(server):
    assert HTTP.get(server.url + "/frontend/settings").status_code == 200


def test_health(server):
    r = HTTP.get(server.url + "/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_spec_is_the_openapi_document(server):
    r = HTTP.get(server.url + "/spec")
    assert r.status_code == 200 and {"/translate", "/v2/translate", "/v2/document"} <= set(r.json()["paths"])


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/detect"), ("POST", "/languages"), ("POST", "/health"), ("POST", "/spec"), ("GET", "/translate")],
)
def test_wrong_method_is_a_405(server, method, path):
    assert HTTP.request(method, server.url + path, timeout=30).status_code == 405


def test_serves_on_after_the_refusals(server):
    assert HTTP.post(server.url + "/translate", data=FORM, timeout=30).status_code == 200
