"""DeepL's glossaries through the real server with the official `deepl` client (server_url set), keys on: create,
list, get, entries, delete; glossary_id on translate_text and translate_document_from_filepath, the term in the
output; the one store behind both dialects (a glossary made through one API is used from the other); another key's
glossary 404; DeepL's answers to bad glossary input. The same calls with deepl-node where Node is available."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
from pathlib import Path

import docx
import httpx
import pytest

from app.glossaries.records import Glossary
from app.glossaries.sqlite_store import SqliteGlossaries
from bench.harness.client import HTTP
from bench.harness.server import add_keys
from tests.app.test_deepl import deepl_node  # noqa: F401 (the fixture installing deepl-node)
from tests.documents import build

deepl = pytest.importorskip("deepl")

KEY, OTHER = "gloss-key", "other-key"
TERMS = {"file": "fichero", "house": "casa grande"}
TEXT = "Open the file."


@pytest.fixture(scope="module")
def keyed(deepl_keyed):
    """The shared DeepL server (the built-in en-es model behind keys) with KEY and OTHER added; (server, keys file)."""
    add_keys(deepl_keyed[1], {KEY: {}, OTHER: {}})
    return deepl_keyed


@pytest.fixture(scope="module")
def translator(keyed):
    deepl.http_client.max_network_retries = 0
    return deepl.Translator(KEY, server_url=keyed[0].url)


def v2(url: str, method: str, path: str, key: str = KEY, **kw) -> httpx.Response:
    """A DeepL-shaped call with the clients' Authorization header."""
    return HTTP.request(method, url + "/v2" + path, headers={"Authorization": f"DeepL-Auth-Key {key}"}, timeout=60,
                         **kw)  # fmt: skip


def libre(url: str, text: str, **extra) -> str:
    """The LibreTranslate dialect's answer (DeepL's default split_sentences=1)."""
    body = {"q": text, "source": "en", "target": "es", "api_key": KEY, "parameters": {"split_sentences": True}}
    r = HTTP.post(url + "/translate", json={**body, **extra}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["translatedText"]


def test_a_glossary_from_creation_to_deletion(translator, keyed):
    # catches: a shape the client cannot parse, codes not DeepL's, entries changed in the store, delete not deleting
    url = keyed[0].url
    made = translator.create_glossary("terms", "EN", "ES", TERMS)
    assert (made.name, made.ready, made.source_lang, made.target_lang, made.entry_count) == ("terms", True, "EN",
                                                                                              "ES", 2)  # fmt: skip
    raw = v2(url, "GET", f"/glossaries/{made.glossary_id}").json()
    assert (raw["source_lang"], raw["target_lang"], raw["creation_time"][-1]) == ("en", "es", "Z")  # as DeepL answers
    got = translator.get_glossary(made.glossary_id)
    assert (got.glossary_id, got.name, got.creation_time, got.entry_count) == (made.glossary_id, "terms",
                                                                               made.creation_time, 2)  # fmt: skip
    assert made.glossary_id in [g.glossary_id for g in translator.list_glossaries()]
    assert translator.get_glossary_entries(made) == TERMS
    translator.delete_glossary(made)
    assert made.glossary_id not in [g.glossary_id for g in translator.list_glossaries()]
    with pytest.raises(deepl.GlossaryNotFoundException):
        translator.get_glossary(made.glossary_id)
    with pytest.raises(deepl.GlossaryNotFoundException):
        translator.delete_glossary(made.glossary_id)


def test_language_pairs_are_the_served_ones(translator):
    assert [(p.source_lang, p.target_lang) for p in translator.get_glossary_languages()] == [("en", "es"), ("es", "en")]


def test_translate_text_applies_the_term_as_translate_does(translator, keyed):
    # catches: glossary_id ignored on /v2/translate (the model says "archivo" unaided), or resolved unlike /translate
    glossary = translator.create_glossary("file", "EN", "ES", {"file": "fichero"})
    plain = translator.translate_text(TEXT, source_lang="EN", target_lang="ES").text
    got = translator.translate_text(TEXT, source_lang="EN", target_lang="ES", glossary=glossary).text
    assert "fichero" not in plain and "fichero" in got
    assert got == libre(keyed[0].url, TEXT, glossary_id=glossary.glossary_id)
    assert translator.translate_text([TEXT, "The house."], source_lang="en", target_lang="es",
                                     glossary=glossary.glossary_id)[0].text == got  # fmt: skip


def test_one_store_behind_both_dialects(translator, keyed):
    # catches: DeepL's routes on a store, or an owner, of their own
    url = keyed[0].url
    body = {"name": "libre", "source": "en", "target": "es", "entries": "file\tfichero\n", "api_key": KEY}
    libre_made = HTTP.post(url + "/glossaries", json=body, timeout=30).json()
    seen = translator.get_glossary(libre_made["glossary_id"])
    assert (seen.name, seen.source_lang, seen.target_lang, seen.entry_count) == ("libre", "EN", "ES", 1)
    assert "fichero" in translator.translate_text(TEXT, source_lang="EN", target_lang="ES", glossary=seen).text
    deepl_made = translator.create_glossary("deepl", "EN", "ES", {"file": "fichero"})
    listed = HTTP.get(url + "/glossaries", params={"api_key": KEY}, timeout=30).json()["glossaries"]
    assert deepl_made.glossary_id in [g["glossary_id"] for g in listed]
    assert "fichero" in libre(url, TEXT, glossary_id=deepl_made.glossary_id)


def test_another_keys_glossary_is_not_found(translator, keyed):
    # catches: glossaries looked up without their owner (the calling key)
    url = keyed[0].url
    mine = translator.create_glossary("mine", "EN", "ES", {"file": "fichero"})
    other = deepl.Translator(OTHER, server_url=url)
    with pytest.raises(deepl.GlossaryNotFoundException):
        other.get_glossary(mine.glossary_id)
    with pytest.raises(deepl.GlossaryNotFoundException):
        other.delete_glossary(mine.glossary_id)
    assert mine.glossary_id not in [g.glossary_id for g in other.list_glossaries()]
    r = v2(
        url,
        "POST",
        "/translate",
        key=OTHER,
        json={"text": [TEXT], "source_lang": "EN", "target_lang": "ES", "glossary_id": mine.glossary_id},
    )
    assert r.status_code == 404 and "glossary_id" in r.json()["message"]
    assert translator.get_glossary(mine.glossary_id).entry_count == 1  # still there for its owner


def test_translate_document_with_a_glossary(translator, keyed, tmp_path):
    # catches: glossary_id ignored on /v2/document
    url = keyed[0].url
    glossary = translator.create_glossary("doc", "EN", "ES", {"file": "fichero"})
    data = build.word([TEXT, "The house is big."])
    (tmp_path / "a.docx").write_bytes(data)
    status = translator.translate_document_from_filepath(
        tmp_path / "a.docx", tmp_path / "out.docx", source_lang="EN", target_lang="ES", glossary=glossary
    )
    assert status.done
    got = [p.text for p in docx.Document(tmp_path / "out.docx").paragraphs]
    r = HTTP.post(url + "/translate_file", files={"file": ("a.docx", data)}, timeout=120,
                   data={"source": "en", "target": "es", "api_key": KEY, "direct": "true",
                         "glossary_id": glossary.glossary_id})  # fmt: skip
    assert r.status_code == 200, r.text
    assert "fichero" in got[0] and got == [p.text for p in docx.Document(io.BytesIO(r.content)).paragraphs]


def mismatched(db: Path) -> str:
    """A glossary of KEY for es->en (no model serves it), written to the store as another server might have."""
    glossary = Glossary("es-en", "es", "en", (("fichero", "file"),), owner=f"key:name-{KEY}")

    async def add() -> None:
        store = SqliteGlossaries(db)
        await store.add(glossary)
        await store.close()

    asyncio.run(add())
    return glossary.id


@pytest.mark.parametrize(
    ("method", "path", "kw", "status", "words"),
    [
        ("POST", "/glossaries", {"json": {"source_lang": "EN", "target_lang": "ES", "entries": "a\tb"}}, 400,
         ["name"]),
        ("POST", "/glossaries", {"json": {"name": "x", "source_lang": "EN", "target_lang": "ES",
                                          "entries": "a\tb\tc"}}, 400, ["entries line 1", "2"]),
        ("POST", "/glossaries", {"json": {"name": "x", "source_lang": "EN", "target_lang": "ES",
                                          "entries": "a\tb\na\tc"}}, 400, ["entries line 2", "twice"]),
        ("POST", "/glossaries", {"data": {"name": "x", "source_lang": "EN", "target_lang": "ES", "entries": "a,b",
                                          "entries_format": "xlsx"}}, 400, ["entries_format"]),
        ("POST", "/glossaries", {"json": {"name": "x", "source_lang": "EN", "target_lang": "DE",
                                          "entries": "a\tb"}}, 400, ["target_lang", "DE"]),
        ("POST", "/glossaries", {"json": {"name": "x", "source_lang": "DE", "target_lang": "ES",
                                          "entries": "a\tb"}}, 400, ["source_lang", "DE"]),
        ("POST", "/glossaries", {"json": {"name": "x", "source_lang": "EN", "target_lang": "ES",
                                          "entries": "".join(f"w{i}\tp{i}\n" for i in range(1001))}}, 413,
         ["glossary_max_entries"]),
        ("GET", "/glossaries/nope", {}, 404, ["glossary_id", "nope"]),
        ("GET", "/glossaries/nope/entries", {}, 404, ["glossary_id"]),
        ("DELETE", "/glossaries/nope", {}, 404, ["glossary_id"]),
        ("POST", "/translate", {"json": {"text": ["x"], "source_lang": "EN", "target_lang": "ES",
                                         "glossary_id": "nope"}}, 404, ["glossary_id"]),
        ("POST", "/translate", {"json": {"text": ["x"], "target_lang": "ES", "glossary_id": "nope"}}, 400,
         ["source_lang", "glossary"]),
    ],
)  # fmt: skip
def test_bad_glossary_input(keyed, method, path, kw, status, words):
    # catches: a LibreTranslate-shaped error, a 422 where DeepL answers 400, a message not naming the field
    url = keyed[0].url
    before = len(v2(url, "GET", "/glossaries").json()["glossaries"])
    r = v2(url, method, path, **kw)
    assert r.status_code == status, r.text
    assert set(r.json()) == {"message"} and all(w in r.json()["message"] for w in words), r.json()
    assert len(v2(url, "GET", "/glossaries").json()["glossaries"]) == before  # nothing stored half-way


def test_a_glossary_for_another_pair_is_refused(keyed):
    # catches: a glossary applied to a pair it was not made for
    url, gid = keyed[0].url, mismatched(keyed[1])
    r = v2(url, "POST", "/translate", json={"text": [TEXT], "source_lang": "EN", "target_lang": "ES",
                                            "glossary_id": gid})  # fmt: skip
    assert r.status_code == 400 and gid in r.json()["message"] and "glossary_id" in r.json()["message"]
    assert v2(url, "GET", f"/glossaries/{gid}").json()["source_lang"] == "es"


def test_the_node_client_manages_glossaries(deepl_node, keyed):  # noqa: F811
    # catches: form bodies (deepl-node's) not read on POST /v2/glossaries, a shape deepl-node cannot parse
    url = keyed[0].url
    script = Path(__file__).with_name("deepl_node_glossaries.js")
    env = {**os.environ, "NODE_PATH": str(deepl_node)}
    run = subprocess.run(["node", str(script), url, KEY], capture_output=True, text=True, env=env, timeout=180)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["made"] == ["node", "en", "es", 2, True] and got["listed"] and got["entries"] == TERMS
    assert "fichero" in got["translated"] and got["pairs"] == [["en", "es"], ["es", "en"]]
    assert got["deleted"] == "GlossaryNotFoundError"
