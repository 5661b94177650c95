"""LibreTranslate's translate_file call shape (multipart `file`, `source`, `target`, `api_key`, then a GET of the
translatedFileUrl), and the /translate oracle."""

from __future__ import annotations

from bench.harness.client import HTTP


def upload(url: str, name: str, data: bytes, timeout: float = 120, headers: dict | None = None, **fields):
    """POST /translate_file as LibreTranslate's clients send it."""
    form = {"source": "en", "target": "es", **fields}
    return HTTP.post(
        url + "/translate_file", files={"file": (name, data)}, data=form, timeout=timeout, headers=headers or {}
    )


def translate_file(url: str, name: str, data: bytes, **fields) -> bytes:
    """Upload, insist on 200, download the translatedFileUrl."""
    r = upload(url, name, data, **fields)
    assert r.status_code == 200, r.text
    got = HTTP.get(r.json()["translatedFileUrl"], timeout=30)
    assert got.status_code == 200, got.text
    return got.content


def oracle(url: str, texts: list[str]) -> dict[str, str]:
    """What /translate answers for each text (sentence by sentence, as documents are translated)."""
    body = {"q": texts, "source": "en", "target": "es", "parameters": {"split_sentences": True}}
    r = HTTP.post(url + "/translate", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return dict(zip(texts, r.json()["translatedText"], strict=True))
