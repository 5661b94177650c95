"""Beam search streams over HTTP on every model family: the built-in model, a tiny OPUS-MT (multi-target Marian whose
checkpoint asks for beam 4), a tiny NLLB, and the tiny native model of the shared server. Deltas concatenate to the
non-streamed text, alternatives come with `done`, and beam streams run beside greedy ones."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from bench.harness.client import HTTP, parse_sse
from tests.app.helpers import body, check_stream, ok, stream, streamed_text

pytest.importorskip("transformers")

TEXTS = ["the cat runs in the big house", "a small red dog sleeps near the river", "hello world"]
FAMILIES = {"builtin": ("es", {"beam_size": 4}), "opus": ("fr", {}), "nllb": ("de", {"beam_size": 4})}
LONG_TEXT = (
    "The old man walked slowly along the river in the morning, and when he reached the bridge he stopped to "
    "watch the boats, the birds and the children who were playing on the other side of the water."
)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_beam_deltas_add_up_to_the_text_on_every_family(families, family):
    """Beam 4 (the OPUS-MT checkpoint's own default): deltas concatenate to translatedText, done is the JSON body;
    with alternatives, done carries them."""
    target, params = FAMILIES[family]
    check_stream(families.url, TEXTS, target=target, parameters=params)
    events = check_stream(families.url, TEXTS[0], target=target, alternatives=2, parameters=params)
    assert len(events[-1].data["alternatives"]) >= 1


def test_beam_deltas_add_up_on_the_native_model(server):
    """The tiny native model: beam sizes, length penalties, split sentences, HTML."""
    for params in ({"beam_size": 2}, {"beam_size": 4, "length_penalty": 0.0}, {"beam_size": 5, "length_penalty": 2}):
        check_stream(server.url, ["the small green tree eats", "good night city"], parameters=params)
    split = {"beam_size": 3, "split_sentences": True}
    check_stream(server.url, "The cat sleeps. The dog runs far away.", parameters=split)
    check_stream(
        server.url, '<p class="a">The cat <b>sleeps</b>. The dog runs.</p><br/>', format="html", parameters=split
    )


def test_beam_streams_beside_greedy_streams(families, server):
    """Beam and greedy streams at once, on several models (each its own engine core) and in one batch of the native
    model: each stream's deltas concatenate to the text that request gets alone, as JSON."""
    jobs = [
        (url, text, target, extra)
        for url, target, beam in ((families.url, "es", 4), (families.url, "fr", 4), (server.url, "es", 3))
        for text in TEXTS
        for extra in ({"parameters": {"beam_size": beam}}, {"parameters": {"beam_size": 1}}, {"alternatives": 1})
    ]
    with ThreadPoolExecutor(len(jobs)) as pool:
        streams = list(pool.map(lambda job: stream(job[0], job[1], target=job[2], **job[3])[1], jobs))
    for (url, text, target, extra), events in zip(jobs, streams, strict=True):
        assert events[-1].event == "done"
        assert streamed_text(events) == ok(url, text, target=target, **extra)["translatedText"], (url, text, extra)


def test_a_long_beam_output_streams_in_several_deltas(families):
    """The built-in model, beam 4, a long sentence: more than one delta, arriving in more than one read (the text
    does not all come at the end), and the first before done."""
    payload = body(LONG_TEXT, stream=True, parameters={"beam_size": 4})
    reads = []
    with HTTP.stream("POST", families.url + "/translate", json=payload, timeout=60) as r:
        for chunk in r.iter_text():
            reads.append(chunk)
    events = parse_sse("".join(reads))
    deltas = [e for e in events if e.event == "token"]
    assert len(deltas) >= 3 and all(isinstance(e.data["token"]["id"], int) for e in deltas[:-1])
    assert sum("event: token" in chunk for chunk in reads) >= 2
    assert (
        streamed_text(events)
        == events[-1].data["translatedText"]
        == ok(families.url, LONG_TEXT, parameters={"beam_size": 4})["translatedText"]
    )
