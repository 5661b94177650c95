"""Through the HTTP edge with the built-in model: the word after a glossary term agrees with it in the answer (the
model wrote it for its own word), in a stream too (a text with glossary terms streams whole, as the answer has it)."""

from __future__ import annotations

import pytest

from app.glossaries.lexicon import lexicon
from bench.harness.client import HTTP, parse_sse

pytestmark = pytest.mark.skipif(lexicon("es") is None, reason="no Spanish analyser (Debian's apertium-eng-spa)")
TEXT, GLOSSARY = "My car is parked in front of the bank.", {"car": "coche"}


def test_the_word_after_a_term_agrees_with_it(builtin):
    # catches: the mend not applied to the answer, or left out of a stream
    body = {"q": TEXT, "source": "en", "target": "es", "glossary": GLOSSARY}
    answer = HTTP.post(builtin.url + "/translate", json=body, timeout=60).json()
    assert answer["translatedText"] == "Mi coche está aparcado delante del banco.", answer
    assert answer["details"]["glossary"][0]["applied"]
    r = HTTP.post(builtin.url + "/translate", json={**body, "stream": True}, timeout=60)
    streamed = "".join(e.data["token"]["text"] for e in parse_sse(r.text) if e.event == "token")
    assert streamed == answer["translatedText"], r.text
