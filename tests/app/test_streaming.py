"""Server-sent events: token deltas add up to the JSON answer (beam search's too), `done` is the JSON body."""

from __future__ import annotations

import pytest

from bench.harness.client import HTTP, parse_sse
from tests.app.helpers import LONG, body, check_stream, ok, streamed_text

TEXTS = ["the cat sleeps", "a big red dog runs in the city", "hello world", "the small green tree eats"]


@pytest.mark.parametrize(
    "params",
    [{}, {"temperature": 1.3, "seed": 7}, {"top_p": 0.8, "top_k": 20, "seed": 3}, {"min_new_tokens": 30}],
    ids=["greedy", "temperature", "top_p-top_k", "min_new_tokens"],
)
def test_tokens_add_up_to_the_json_answer(server, params):
    """Greedy and seeded sampling stream token by token (ids set) and end with the JSON body."""
    events = check_stream(server.url, TEXTS[1], parameters=params)
    tokens = [e for e in events if e.event == "token"]
    assert len(tokens) >= 2
    assert all(isinstance(e.data["token"]["id"], int) for e in tokens[:-1])


def test_list_streams_every_item_with_its_index(server):
    """A list q streams every item, tagged by index, and done carries the lists."""
    events = check_stream(server.url, TEXTS, parameters={"temperature": 0.9, "seed": 11})
    assert {e.data["index"] for e in events if e.event == "token"} == set(range(len(TEXTS)))


def test_split_sentences_streams_in_order(server):
    """Sentences stream in order with their separators, as the JSON answer joins them."""
    check_stream(
        server.url, "The cat sleeps. The dog runs in the city!  Good night.", parameters={"split_sentences": True}
    )
    check_stream(server.url, ["The cat sleeps. The dog runs.", "Hello world."], parameters={"split_sentences": True})


def test_html_streams_markup_and_text(server):
    """HTML: markup before, between and after units is streamed too (also trailing markup, and all-markup)."""
    markup = '<p class="a">The cat <b>sleeps</b>. The dog runs.</p><code>x &lt; y</code><br/>'
    check_stream(server.url, markup, format="html")
    check_stream(server.url, markup, format="html", parameters={"split_sentences": True, "temperature": 1.1, "seed": 5})
    events = check_stream(server.url, "<hr/><!-- nothing to translate -->", format="html")
    assert [e.event for e in events] == ["token", "done"]


def test_beam_search_streams_its_stable_prefix(server):
    """Beams stream too (their deltas add up to the best text); done carries the n-best as the JSON body does."""
    events = check_stream(server.url, TEXTS, alternatives=1, parameters={"beam_size": 3})
    assert (
        events[-1].data["alternatives"]
        == ok(server.url, TEXTS, alternatives=1, parameters={"beam_size": 3})["alternatives"]
    )


def test_accept_header_streams(server):
    """Accept: text/event-stream streams without "stream": true; "stream": false in the body wins."""
    headers = {"Accept": "text/event-stream"}
    with HTTP.stream("POST", server.url + "/translate", json=body(TEXTS[0]), headers=headers, timeout=60) as r:
        events = parse_sse(r.read().decode())
    assert r.headers["content-type"].startswith("text/event-stream")
    assert events[-1].event == "done"
    assert streamed_text(events) == events[-1].data["translatedText"] == ok(server.url, TEXTS[0])["translatedText"]
    r = HTTP.post(server.url + "/translate", json=body(TEXTS[0], stream=False), headers=headers, timeout=60)
    assert r.headers["content-type"] == "application/json"


def test_errors_before_streaming_are_json(server):
    """Refusals happen before the stream starts: a JSON error with its status, not an event stream."""
    r = HTTP.post(server.url + "/translate", json={"q": "x", "source": "en", "target": "zz", "stream": True})
    assert r.status_code == 400
    assert r.json()["error_type"] == "unsupported_language"


def test_keep_alive_comments_during_silence(small):
    """A stream waiting behind a long request (one row at a time) hears nothing: meanwhile `: keep-alive` comments
    keep the connection warm."""
    two_long = ["<b>the cat sleeps</b>", "<b>a dog runs</b>"]  # one after the other: ~0.4 s on the tiny model
    ahead = body(two_long, format="html", stream=True, parameters={"beam_size": 8, **LONG})
    with HTTP.stream("POST", small.url + "/translate", json=ahead, timeout=60) as long:
        lines = long.iter_lines()
        assert next(lines) == "event: token"  # "<b>": the long job is queued
        with HTTP.stream("POST", small.url + "/translate", json=body("hello world", stream=True), timeout=60) as r:
            raw = r.read().decode()
        assert parse_sse("\n".join(lines))[-1].event == "done"
    assert raw.count(": keep-alive\n\n") >= 2
    assert parse_sse(raw)[-1].event == "done"
