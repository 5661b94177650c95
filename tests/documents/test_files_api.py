"""The /translate_file and /download_file contract: LibreTranslate's client shape, direct answers, progress events,
downloads bound to the API key and expiring, hostile and unknown files refused with the limit named, and a client
that goes away cancelling the file's job."""

from __future__ import annotations

import io
import re
import time
import zipfile

import docx
import httpx
import pytest

from app.documents.store import FileStore
from app.settings import BUILTIN
from bench.harness.client import HTTP, metrics, parse_sse, value
from bench.harness.server import ServerProcess
from tests.app.helpers import idle, wait_for
from tests.documents import build
from tests.documents.client import oracle, upload


def test_libretranslate_client_shape(builtin):
    """Multipart file + source/target/api_key, a translatedFileUrl on this server, then a GET of it."""
    r = upload(builtin.url, "notes.txt", b"Good morning.\n", api_key="k1")
    assert r.status_code == 200, r.text
    url = r.json()["translatedFileUrl"]
    assert url.startswith(builtin.url + "/download_file/") and url.endswith(".notes.txt")
    got = HTTP.get(url)
    assert got.status_code == 200 and got.text == oracle(builtin.url, ["Good morning."])["Good morning."] + "\n"
    assert "attachment" in got.headers["content-disposition"]
    assert HTTP.get(url, params={"api_key": "k1"}).status_code == 200
    other = HTTP.get(url, params={"api_key": "someone-else"})
    assert other.status_code == 404 and other.json()["error_type"] == "not_found"
    assert HTTP.get(builtin.url + "/download_file/..%2F..%2Fetc%2Fpasswd").status_code == 404


def test_source_auto(builtin):
    """source=auto detects the file's language and says so."""
    r = upload(builtin.url, "a.txt", b"Where is the station? The house is big.\n", source="auto")
    assert r.status_code == 200, r.text
    assert r.json()["detectedLanguage"]["language"] == "en"


def test_direct_answer(builtin):
    """direct=true or Accept: application/octet-stream answers with the file itself."""
    for extra, headers in (({"direct": "true"}, {}), ({}, {"accept": "application/octet-stream"})):
        r = upload(builtin.url, "a.docx", build.word(), headers=headers, **extra)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/vnd.openxmlformats-officedocument.wordprocessing")
        assert len(docx.Document(io.BytesIO(r.content)).paragraphs) == 7


def test_progress_events(builtin):
    """Accept: text/event-stream: progress events up to the total, then done with the download URL."""
    lines = "\n".join(f"The house number {i} is big." for i in range(20)).encode()
    with HTTP.stream(
        "POST",
        builtin.url + "/translate_file",
        files={"file": ("a.txt", lines)},
        data={"source": "en", "target": "es"},
        headers={"accept": "text/event-stream"},
        timeout=60,
    ) as r:
        events = parse_sse(r.read().decode())
    progress = [e.data for e in events if e.event == "progress"]
    assert progress and progress[-1]["done"] <= progress[-1]["total"] == 20
    assert events[-1].event == "done" and events[-1].data["details"]["segments"] == 20
    assert HTTP.get(events[-1].data["translatedFileUrl"]).status_code == 200


def bomb(entries: int, size: int) -> bytes:
    """A zip with `entries` entries of `size` zero bytes each (deflated: a few bytes per megabyte)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(entries):
            z.writestr(f"word/f{i}.xml", b"\0" * size)
    return out.getvalue()


def with_entity(data: bytes) -> bytes:
    """The docx with an entity declaration in word/document.xml."""
    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for info in src.infolist():
            body = src.read(info)
            if info.filename == "word/document.xml":
                body = body.replace(b"?>", b'?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;">]>', 1)
            z.writestr(info, body)
    return out.getvalue()


def refused(url: str, name: str, data: bytes, status: int, words: str) -> None:
    """The upload is refused with `status` and a JSON error naming `words`."""
    r = upload(url, name, data)
    assert r.status_code == status, r.text
    assert words in r.json()["error"], r.json()


def test_hostile_and_unknown_files(builtin):
    """Zip bombs, entity expansion, corrupt, unknown and oversized files: the right status, the limit named."""
    refused(builtin.url, "a.docx", bomb(1, 3_000_000), 413, "max_unzipped_bytes=2000000")
    refused(builtin.url, "a.docx", bomb(61, 10), 413, "max_zip_entries=60")
    refused(builtin.url, "a.docx", with_entity(build.word()), 422, "entity")
    bad_xliff = build.XLIFF12.replace("<xliff", '<!DOCTYPE x [<!ENTITY a "b">]><xliff', 1).encode()
    refused(builtin.url, "a.xlf", bad_xliff, 422, "entity")
    refused(builtin.url, "a.docx", b"not a zip at all", 422, "not a valid docx")
    refused(builtin.url, "a.odt", build.word(), 422, "not a valid odt")
    refused(builtin.url, "a.xlf", b"<xliff><unclosed>", 422, "not valid XML")
    refused(builtin.url, "a.txt", b"\xff\xfe\x00bad", 422, "UTF-8")
    refused(builtin.url, "a.xyz", b"hello", 415, "send one of")
    refused(builtin.url, "a.pdf", b"%PDF-1.4", 415, "pdf")
    refused(builtin.url, "a.txt", b"x" * 400_000, 413, "max_file_bytes=300000")
    refused(builtin.url, "a.txt", b"Hello there.\n" * 301, 413, "max_segments=300")
    refused(builtin.url, "a.txt", (b"Hello there. " * 100 + b"\n") * 20, 413, "max_file_chars=20000")
    missing = HTTP.post(builtin.url + "/translate_file", data={"source": "en", "target": "es"}, files={"x": b"1"})
    assert missing.status_code == 422 and "file" in missing.json()["error"]
    no_target = HTTP.post(builtin.url + "/translate_file", files={"file": ("a.txt", b"Hi.")})
    assert no_target.status_code == 422 and "target" in no_target.json()["error"]


def test_store_expiry_and_keys(tmp_path):
    """A stored file is served to its key (or to a request naming none) until the TTL passes."""
    store = FileStore(str(tmp_path), ttl=0.2)
    name = store.put(b"data", "../../x y.txt", "key")
    assert name.endswith(".x_y.txt") and store.get(name, "key") == b"data" and store.get(name, None) == b"data"
    for key, wait in (("other", 0), ("key", 0.3)):
        time.sleep(wait)
        try:
            store.get(name, key)
            raise AssertionError("served")
        except Exception as exc:
            assert getattr(exc, "status", None) == 404
    store.put(b"more", "b.txt", None)
    assert not (tmp_path / name).exists()  # swept


@pytest.fixture(scope="module")
def one_row(tmp_path_factory):
    """The built-in model decoding one row at a time: a 200-line file takes seconds, whatever the CPU."""
    files = tmp_path_factory.mktemp("files")
    args = ("--model", str(BUILTIN), "--max-batch-size", "1", "--warmup-rounds", "0", "--files-dir", str(files))
    proc = ServerProcess(*args).wait()
    yield proc
    proc.stop()


def test_client_gone_cancels(one_row):
    """A client that stops waiting for a long file: its units are aborted, not run to the end."""
    wait_for(lambda: idle(one_row.url), timeout=30)
    before = value(metrics(one_row.url), "mt_requests_total", model="en-es", finish_reason="aborted")
    lines = "\n".join(f"The cat number {i} sleeps in the big red house near the river." for i in range(200))
    try:
        upload(one_row.url, "long.txt", lines.encode(), timeout=1.0)
    except httpx.ReadTimeout:
        pass
    wait_for(lambda: idle(one_row.url), timeout=10)
    aborted = value(metrics(one_row.url), "mt_requests_total", model="en-es", finish_reason="aborted") - before
    assert aborted >= 50


def test_one_job_duplicates_once(builtin):
    """Repeated segments of a file are translated once; /info shows the file limits."""
    wait_for(lambda: idle(builtin.url), timeout=30)
    count = lambda: sum(
        value(metrics(builtin.url), "mt_requests_total", model="en-es", finish_reason=f) for f in ("eos", "length")
    )
    before = count()
    r = upload(builtin.url, "a.txt", b"The house is big.\nGood morning.\n" * 10)
    assert r.status_code == 200 and r.json()["details"]["segments"] == 20
    assert count() - before == 2
    limits = HTTP.get(builtin.url + "/info").json()["limits"]
    assert limits["max_file_bytes"] == 300_000 and limits["max_segments"] == 300


def test_sentence_over_the_token_limit(builtin):
    """A sentence longer than max_input_tokens is refused naming the limit (documents are cut into sentences)."""
    r = upload(builtin.url, "a.txt", ("word " * 400).encode())
    assert r.status_code == 422, r.text
    assert re.fullmatch(r"file: a sentence of \d+ tokens exceeds max_input_tokens=256", r.json()["error"])
