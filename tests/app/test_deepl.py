"""DeepL's v2 API through the real server with the official `deepl` client (server_url set), keys on: languages,
translate_text (one text, a list, html), documents (docx, .po), usage, keys; answers equal to the LibreTranslate
dialect's for the same request (one planner, one pipeline); DeepL's bad-input answers, the server serving on."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import docx
import httpx
import polib
import pytest

from bench.harness.client import HTTP, metrics, value
from bench.harness.server import add_keys
from tests.documents import build

deepl = pytest.importorskip("deepl")

KEY, FREE, TINY, SLOW = "deepl-key", "free-key", "tiny-key", "slow-key"
KEYS = {KEY: {"daily_char_limit": 100_000}, FREE: {}, TINY: {"daily_char_limit": 30}, SLOW: {"req_limit": 1}}
TEXTS = ["The house is big.", "Good morning. Where is the station?"]
LONG = " ".join(["the big red dog runs in the green city at night"] * 40)  # > 256 tokens, no sentence end


@pytest.fixture(scope="module")
def keyed(deepl_keyed):
    """The shared DeepL server (the built-in en-es model behind keys, a 20000-byte body limit) with KEYS added."""
    proc, db = deepl_keyed
    add_keys(db, KEYS)
    return proc


@pytest.fixture(scope="module")
def translator(keyed):
    """The official client pointed at the server, with no retries (a refusal must surface, not be retried)."""
    deepl.http_client.max_network_retries = 0
    return deepl.Translator(KEY, server_url=keyed.url)


def libre(url: str, texts: list[str], **extra) -> list[str]:
    """The LibreTranslate dialect's answer for the same texts (DeepL's default split_sentences=1)."""
    body = {"q": texts, "source": "en", "target": "es", "api_key": KEY, "parameters": {"split_sentences": True}}
    r = HTTP.post(url + "/translate", json={**body, **extra}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["translatedText"]


def v2(url: str, path: str, key: str | None = KEY, **kw) -> httpx.Response:
    """A DeepL-shaped POST with the clients' Authorization header."""
    headers = {"Authorization": f"DeepL-Auth-Key {key}"} if key else {}
    return HTTP.post(url + "/v2" + path, headers=headers, timeout=60, **kw)


def test_languages(translator):
    """What the served model translates, in DeepL's codes; no model here honours formality."""
    sources = translator.get_source_languages()
    assert [(lang.code, lang.name) for lang in sources] == [("EN", "English"), ("ES", "Spanish")]
    targets = translator.get_target_languages()
    assert [(lang.code, lang.supports_formality) for lang in targets] == [
        ("EN-GB", False), ("EN-US", False), ("ES", False), ("ES-419", False)]  # fmt: skip


def test_translate_text_one_and_a_list_as_libretranslate_answers(translator, keyed):
    """One text gives one result, a list gives the list in order; each equals /translate of the same text."""
    want = libre(keyed.url, TEXTS)
    one = translator.translate_text(TEXTS[0], target_lang="ES")
    assert (one.text, one.detected_source_lang, one.billed_characters) == (want[0], "EN", len(TEXTS[0]))
    many = translator.translate_text(TEXTS, source_lang="EN", target_lang="es")
    assert [r.text for r in many] == want and [r.billed_characters for r in many] == [len(t) for t in TEXTS]
    assert translator.translate_text(TEXTS[::-1], target_lang="ES-419")[0].text == want[1]  # variant: its base


@pytest.mark.parametrize("text", ["Hello world", "Hello", "Thanks"])
def test_default_call_without_source(translator, keyed, text):
    """DeepL users' plain call, no source_lang: EN (the only source served into ES), as /translate from en (the
    issue's "Hello world" was a 400, detected as fuv)."""
    got = translator.translate_text(text, target_lang="ES")
    assert (got.text, got.detected_source_lang) == (libre(keyed.url, [text])[0], "EN")


def test_spanish_into_american_english_is_the_reverse_pair(translator, keyed):
    """DeepL users' usual call for English, target_lang EN-US and no source: ES (the only source served into EN), as
    /translate from es to en."""
    got = translator.translate_text("¿Dónde está la estación?", target_lang="EN-US")
    want = libre(keyed.url, ["¿Dónde está la estación?"], source="es", target="en")[0]
    assert (got.text, got.detected_source_lang) == (want, "ES") and "station" in want.lower()


def test_translate_html_keeps_the_markup(translator, keyed):
    html = "<p>The house is <b>big</b>.</p>"
    got = translator.translate_text(html, target_lang="ES", tag_handling="html")
    assert got.text == libre(keyed.url, [html], format="html")[0]
    assert got.text.startswith("<p>") and "<b>" in got.text and got.text.endswith("</p>")


def test_form_body_with_repeated_text_and_ignore_tags(keyed):
    """A form repeating `text` answers each in order; ignore_tags keeps an element's text untranslated."""
    r = v2(keyed.url, "/translate", data={"text": TEXTS, "target_lang": "ES"})
    assert r.status_code == 200 and [t["text"] for t in r.json()["translations"]] == libre(keyed.url, TEXTS)
    assert "billed_characters" not in r.json()["translations"][0]
    markup = "<p>The house is big. <keep>The house is big.</keep></p>"
    r = v2(keyed.url, "/translate", json={"text": [markup], "target_lang": "ES", "tag_handling": "xml"})
    kept = v2(keyed.url, "/translate", json={"text": [markup], "target_lang": "ES", "tag_handling": "xml",
                                             "ignore_tags": ["keep"]})  # fmt: skip
    translated = libre(keyed.url, ["The house is big."])[0]
    assert r.json()["translations"][0]["text"] == f"<p>{translated} <keep>{translated}</keep></p>"
    assert kept.json()["translations"][0]["text"] == f"<p>{translated} <keep>The house is big.</keep></p>"


def libre_file(url: str, name: str, data: bytes) -> bytes:
    """The LibreTranslate dialect's translated file for the same upload (the same pipeline)."""
    r = HTTP.post(url + "/translate_file", files={"file": (name, data)},
                   data={"source": "en", "target": "es", "api_key": KEY, "direct": "true"}, timeout=120)  # fmt: skip
    assert r.status_code == 200, r.text
    return r.content


def texts_of(name: str, data: bytes) -> list:
    """The paragraphs of a .docx, the (msgid, msgstr) entries of a .po."""
    if name.endswith(".docx"):
        return [p.text for p in docx.Document(io.BytesIO(data)).paragraphs]
    return [(e.msgid, e.msgstr) for e in polib.pofile(data.decode())]


@pytest.mark.parametrize(("name", "data"), [("a.docx", build.word()), ("a.po", build.gettext())])
def test_documents(translator, keyed, tmp_path, name, data):
    """translate_document_from_filepath on a .docx and a .po: translated, and as /translate_file writes it."""
    (tmp_path / name).write_bytes(data)
    status = translator.translate_document_from_filepath(tmp_path / name, tmp_path / f"out-{name}", target_lang="ES")
    assert status.done and status.billed_characters > 0
    got = texts_of(name, (tmp_path / f"out-{name}").read_bytes())
    assert got == texts_of(name, libre_file(keyed.url, name, data)) and got != texts_of(name, data)


def test_usage_counts_the_calling_keys_characters(translator, keyed):
    """get_usage before and after a request: the count grows by its characters; the limit is the key's daily limit,
    or DeepL's unlimited answer for a key without one."""
    before = translator.get_usage().character
    translator.translate_text("Good night.", target_lang="ES")
    after = translator.get_usage().character
    assert (after.count - before.count, after.limit) == (len("Good night."), 100_000)
    free = deepl.Translator(FREE + ":fx", server_url=keyed.url).get_usage().character  # ":fx": the same key
    assert free.limit == 1_000_000_000_000


def test_keys(keyed):
    """A wrong key, and no key, are refused with 403 when keys are on; a key with DeepL's :fx suffix is the key."""
    with pytest.raises(deepl.AuthorizationException):
        deepl.Translator("wrong-key", server_url=keyed.url).translate_text("x", target_lang="ES")
    assert deepl.Translator(FREE + ":fx", server_url=keyed.url).translate_text(TEXTS[0], target_lang="ES").text
    r = v2(keyed.url, "/translate", key=None, json={"text": ["x"], "target_lang": "ES"})
    assert r.status_code == 403 and "auth_key" in r.json()["message"]


def test_keys_off_accept_any_key(server):
    """With keys off, any key (or none) is accepted."""
    for key in ("anything", "anything:fx", None):
        r = v2(server.url, "/translate", key=key, json={"text": ["the cat"], "target_lang": "es"})
        assert r.status_code == 200, r.text


def upload(url: str, name: str = "a.txt", data: bytes = b"The house is big.\n") -> dict:
    """POST /v2/document; its id and key."""
    r = v2(url, "/document", files={"file": (name, data)}, data={"target_lang": "ES"})
    assert r.status_code == 200, r.text
    return r.json()


def done(url: str, doc: dict) -> dict:
    """The document's status once it is no longer queued or translating."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r = v2(url, f"/document/{doc['document_id']}", json={"document_key": doc["document_key"]})
        assert r.status_code == 200, r.text
        if r.json()["status"] not in ("queued", "translating"):
            return r.json()
    raise AssertionError("document not done in 60 s")


def test_document_result_once_and_wrong_key(keyed):
    """A wrong document_key is a 404 naming it; the result comes once, then 404 naming document_id."""
    doc = upload(keyed.url)
    wrong = v2(keyed.url, f"/document/{doc['document_id']}", json={"document_key": "0" * 64})
    assert wrong.status_code == 404 and "document_key" in wrong.json()["message"]
    assert done(keyed.url, doc) == {"document_id": doc["document_id"], "status": "done", "seconds_remaining": 0,
                                    "billed_characters": len("The house is big.")}  # fmt: skip
    path = f"/document/{doc['document_id']}/result"
    first = v2(keyed.url, path, json={"document_key": doc["document_key"]})
    assert first.status_code == 200 and first.content.decode() == libre(keyed.url, ["The house is big."])[0] + "\n"
    again = v2(keyed.url, path, json={"document_key": doc["document_key"]})
    assert again.status_code == 404 and "document_id" in again.json()["message"]


BAD = [  # (id, path, request kwargs, status, words the message must contain)
    ("missing-target", "/translate", {"json": {"text": ["x"]}}, 400, ["target_lang"]),
    ("unknown-target", "/translate", {"json": {"text": ["x"], "target_lang": "XX"}}, 400, ["target_lang", "XX"]),
    ("unserved-target", "/translate", {"json": {"text": ["x"], "target_lang": "DE"}}, 400,
     ["target_lang", "DE", "served pairs: EN->ES, ES->EN"]),
    ("same-language", "/translate", {"json": {"text": ["Hello"], "target_lang": "EN-US", "source_lang": "EN"}}, 400,
     ["target_lang", "EN-US", "served pairs: EN->ES, ES->EN"]),
    ("unknown-source", "/translate", {"json": {"text": ["x"], "target_lang": "ES", "source_lang": "XX"}}, 400,
     ["source_lang"]),
    ("missing-text", "/translate", {"json": {"target_lang": "ES"}}, 400, ["text"]),
    ("empty-text", "/translate", {"data": {"text": "", "target_lang": "ES"}}, 400, ["text"]),
    ("blank-item", "/translate", {"json": {"text": ["a", " "], "target_lang": "ES"}}, 400, ["text[1]"]),
    ("too-long", "/translate", {"json": {"text": [LONG], "target_lang": "ES", "split_sentences": "0"}}, 400,
     ["text[0]", "max_input_tokens=256"]),
    ("too-many-texts", "/translate", {"json": {"text": ["a"] * 65, "target_lang": "ES"}}, 400, ["text", "max_items"]),
    ("bad-tag-handling", "/translate", {"json": {"text": ["x"], "target_lang": "ES", "tag_handling": "pdf"}}, 400,
     ["tag_handling"]),
    ("bad-split", "/translate", {"json": {"text": ["x"], "target_lang": "ES", "split_sentences": "2"}}, 400,
     ["split_sentences"]),
    ("bad-formality", "/translate", {"json": {"text": ["x"], "target_lang": "ES", "formality": "rude"}}, 400,
     ["formality"]),
    ("glossary-without-source", "/translate", {"json": {"text": ["x"], "target_lang": "ES", "glossary_id": "g"}}, 400,
     ["source_lang", "glossary"]),
    ("unknown-glossary", "/translate",
     {"json": {"text": ["x"], "target_lang": "ES", "source_lang": "EN", "glossary_id": "g"}}, 404, ["glossary_id"]),
    ("body-too-large", "/translate", {"json": {"text": ["x" * 30_000], "target_lang": "ES"}}, 413, ["max_body_bytes"]),
    ("bad-language-type", "/languages", {"json": {"type": "both"}}, 400, ["type"]),
    ("unknown-document", "/document/0123456789ABCDEF0123456789ABCDEF", {"json": {"document_key": "K"}}, 404,
     ["document_id"]),
    ("missing-document-key", "/document/0123456789ABCDEF0123456789ABCDEF", {"json": {}}, 400, ["document_key"]),
    ("document-without-file", "/document", {"files": {"x": ("a.txt", b"a")}, "data": {"target_lang": "ES"}}, 400,
     ["file"]),
    ("document-bad-format", "/document", {"files": {"file": ("a.pdf", b"%PDF")}, "data": {"target_lang": "ES"}}, 400,
     ["file", "pdf"]),
    ("document-conversion", "/document",
     {"files": {"file": ("a.txt", b"a")}, "data": {"target_lang": "ES", "output_format": "pdf"}}, 400,
     ["output_format"]),
]  # fmt: skip


@pytest.mark.parametrize(("path", "kw", "status", "words"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input(keyed, path, kw, status, words):
    """DeepL's status code and {"message"} naming the field."""
    r = v2(keyed.url, path, **kw)
    assert r.status_code == status, r.text
    assert set(r.json()) == {"message"}
    for word in words:
        assert word in r.json()["message"], (word, r.json())


def test_quota_and_rate_limits(keyed):
    """A spent daily quota is DeepL's 456; over the requests per minute a 429 with Retry-After."""
    body = {"text": ["The house is big."], "target_lang": "ES"}
    assert v2(keyed.url, "/translate", key=TINY, json=body).status_code == 200
    r = v2(keyed.url, "/translate", key=TINY, json=body)
    assert r.status_code == 456 and "daily_char_limit=30" in r.json()["message"]
    assert v2(keyed.url, "/translate", key=SLOW, json=body).status_code == 200
    r = v2(keyed.url, "/translate", key=SLOW, json=body)
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0


def test_serves_on_and_counts_requests_per_dialect(keyed):
    """After every refusal the server still serves both dialects; mt_api_requests_total counts each by its label."""
    before = metrics(keyed.url)
    assert v2(keyed.url, "/translate", json={"text": ["Good morning."], "target_lang": "ES"}).status_code == 200
    assert v2(keyed.url, "/usage").status_code == 200
    assert libre(keyed.url, ["Good morning."])
    after = metrics(keyed.url)
    grew = {d: value(after, "mt_api_requests_total", dialect=d) - value(before, "mt_api_requests_total", dialect=d)
            for d in ("deepl", "libretranslate")}  # fmt: skip
    assert grew == {"deepl": 2, "libretranslate": 1}


NODE_CLIENT = "deepl-node@1.28.0"


@pytest.fixture(scope="module")
def deepl_node() -> Path:
    """deepl-node installed from npm into a folder of its own (kept between runs); skips where Node or npm is absent
    or npm cannot fetch it."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm not installed (Debian packages nodejs and npm; .ci/system-deps installs them)")
    folder = Path(tempfile.gettempdir()) / f"mt-{NODE_CLIENT.replace('@', '-')}"
    if not (folder / "node_modules" / "deepl-node" / "package.json").exists():
        cmd = ["npm", "install", "--prefix", str(folder), NODE_CLIENT, "--no-audit", "--no-fund", "--loglevel=error"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm could not fetch {NODE_CLIENT} in 300 s")
        if done.returncode != 0:
            pytest.skip(f"npm could not fetch {NODE_CLIENT}: {done.stderr.strip()[-300:]}")
    return folder / "node_modules"


def test_the_node_client_makes_the_same_calls(deepl_node, keyed, tmp_path):
    """deepl-node (form bodies, GET with query strings): languages, translateText (one, a list, html), usage before
    and after, translateDocument on a .docx and a .po, a wrong key refused; the same answers as the Python client's."""
    for name, data in (("a.docx", build.word()), ("a.po", build.gettext())):
        (tmp_path / name).write_bytes(data)
    script = Path(__file__).with_name("deepl_node_calls.js")
    env = {**os.environ, "NODE_PATH": str(deepl_node)}
    run = subprocess.run(["node", str(script), keyed.url, KEY, str(tmp_path)], capture_output=True, text=True,
                         env=env, timeout=180)  # fmt: skip
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    want = libre(keyed.url, TEXTS)
    targets = [code.lower() for code in got["targets"]]  # in whatever case the installed deepl-node gives them
    assert (got["sources"], targets) == (["en", "es"], ["en-gb", "en-us", "es", "es-419"])
    assert got["one"] == [want[0], "en", len(TEXTS[0])] and got["list"] == want
    assert got["html"] == libre(keyed.url, ["<p>The house is <b>big</b>.</p>"], format="html")[0]
    assert got["usage"] == [len(TEXTS[0]) + sum(map(len, TEXTS)) + len("<p>The house is <b>big</b>.</p>"), 100_000]
    assert got["a.docx"] and got["a.po"] and got["wrong"] == "AuthorizationError"
    for name in ("a.docx", "a.po"):
        translated = texts_of(name, (tmp_path / f"node-{name}").read_bytes())
        assert translated == texts_of(name, libre_file(keyed.url, name, (tmp_path / name).read_bytes()))
