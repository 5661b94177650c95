"""Server-sent events: token deltas add up to the JSON answer, `done` is the JSON body, beams stream nothing."""

from __future__ import annotations

import httpx
import pytest

from tests.app.helpers import body, ok, parse_sse, stream, streamed_text

TEXTS = ["the cat sleeps", "a big red dog runs in the city", "hello world", "the small green tree eats"]


def without_timing(answer: dict) -> dict:
    """The answer with the per-run timing fields dropped."""
    details = answer["details"] if isinstance(answer["details"], list) else [answer["details"]]
    for d in details:
        d.pop("queue_ms"), d.pop("total_ms")
    return answer


def check_stream(url: str, q, **extra) -> list:
    """Stream and answer as JSON; token deltas concatenate to translatedText and done equals the JSON body."""
    r, events = stream(url, q, **extra)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["cache-control"] == "no-cache"
    assert r.headers["x-accel-buffering"] == "no"
    answer = ok(url, q, **extra)
    assert [e.event for e in events][-1] == "done"
    assert [e.event for e in events[:-1]] == ["token"] * (len(events) - 1)
    done = events[-1].data
    assert without_timing(done) == without_timing(answer)
    texts = [answer["translatedText"]] if isinstance(q, str) else answer["translatedText"]
    for i, text in enumerate(texts):
        assert streamed_text(events, i) == text
        running = ""
        for e in (e for e in events if e.event == "token" and e.data["index"] == i):
            assert e.data["token"]["text"], "empty deltas are not sent"
            assert "\ufffd" not in e.data["token"]["text"]
            running += e.data["token"]["text"]
            assert e.data["text"] == running  # the whole text so far
    return events


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


def test_beam_search_sends_only_done(server):
    """Beams stream no partial tokens: a single done event with the JSON body (n-best included)."""
    r, events = stream(server.url, TEXTS[:2], alternatives=1, parameters={"beam_size": 3})
    assert [e.event for e in events] == ["done"]
    answer = ok(server.url, TEXTS[:2], alternatives=1, parameters={"beam_size": 3})
    assert without_timing(events[0].data) == without_timing(answer)


def test_accept_header_streams(server):
    """Accept: text/event-stream streams without "stream": true; "stream": false in the body wins."""
    headers = {"Accept": "text/event-stream"}
    with httpx.stream("POST", server.url + "/translate", json=body(TEXTS[0]), headers=headers, timeout=60) as r:
        events = parse_sse(r.read().decode())
    assert r.headers["content-type"].startswith("text/event-stream")
    assert events[-1].event == "done"
    assert streamed_text(events) == events[-1].data["translatedText"] == ok(server.url, TEXTS[0])["translatedText"]
    r = httpx.post(server.url + "/translate", json=body(TEXTS[0], stream=False), headers=headers, timeout=60)
    assert r.headers["content-type"] == "application/json"


def test_errors_before_streaming_are_json(server):
    """Refusals happen before the stream starts: a JSON error with its status, not an event stream."""
    r = httpx.post(server.url + "/translate", json={"q": "x", "source": "en", "target": "zz", "stream": True})
    assert r.status_code == 400
    assert r.json()["error_type"] == "unsupported_language"


def test_keep_alive_comments_during_silence(small):
    """A beam search sends nothing until done: meanwhile `: keep-alive` comments keep the connection warm."""
    payload = body(
        ["the cat sleeps", "a dog runs"],  # two long beam searches, one after the other (one row at a time)
        stream=True,
        parameters={"beam_size": 4, "min_new_tokens": 255, "max_new_tokens": 255},
    )
    with httpx.stream("POST", small.url + "/translate", json=payload, timeout=60) as r:
        raw = r.read().decode()
    assert raw.count(": keep-alive\n\n") >= 2
    assert [e.event for e in parse_sse(raw)] == ["done"]
