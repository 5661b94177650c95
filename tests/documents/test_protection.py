"""Protected spans: placeholders and characters a vocabulary cannot spell come out exactly as they went in, through
/translate (streamed or not) and documents, on the built-in model and on tiny OPUS-MT- and NLLB-style models."""

from __future__ import annotations

import pytest

from app.documents import assign, styled_runs
from app.protect import Chunk, Masked, find_spans, split_layout
from app.text import html_layout, plain_layout
from bench.harness.client import HTTP, parse_sse
from tests.app.helpers import ok
from tests.documents.client import translate_file

UNSPELLABLE = ["I ❤️ Paris", "Hello\u0000world", "The house 🏠 is big."]
KEEP_ORDER = ["❤️", "\u0000", "🏠"]
spells = lambda c: c not in "❤\ufe0f\u0000🏠"


def spans(text: str, markup: bool = False) -> list[str]:
    """The protected strings of a text (placeholders on)."""
    return [text[a:b] for a, b in find_spans(text, spells, placeholders=True, markup=markup)]


def test_find_spans():
    """printf, brace, ICU plural/select (whole), tags and references, unspellable runs; a bare percent is text."""
    assert spans("Hi %s, %(name)s has %1$d and %.2f, 100%% done, 50% off") == ["%s", "%(name)s", "%1$d", "%.2f", "%%"]
    assert spans("{0} of {name} and {{count}}") == ["{0}", "{name}", "{{count}}"]
    icu = "{count, plural, one {# item} other {# items}}"
    assert spans(f"You have {icu} now, {{user}}") == [icu, "{user}"]
    assert spans("Click <b class='x'>here</b> &amp; go", markup=True) == ["<b class='x'>", "</b>", "&amp;"]
    assert spans("I ❤️ Paris") == ["❤️"]


def test_masked_round_trip():
    """Marks come back once each: spans restored with their spacing; lost, repeated or crossed marks fail."""
    find = lambda t: find_spans(t, spells, placeholders=True)
    m = Masked([("Click ", False), ("here", True), (" to see %s now ❤️.", False)], find)
    assert m.text == "Click 1001 here 1002 to see 1003 now 1004."
    chunks = m.restore("Pulse 1001 aquí 1002 para ver 1003 ahora 1004.")
    assert chunks == [Chunk("Pulse ", None), Chunk("aquí", 1), Chunk(" para ver %s ahora ❤️.", None)]
    for broken in ("Pulse aquí 1002 para 1003 1004.", "1001 a 1002 1003 1003 1004", "1002 a 1001 1003 1004"):
        assert m.restore(broken) is None
    pieces = {"Click": "Pulse", "here": "aquí", "to see": "para ver", "now": "ahora"}
    assert "".join(c.text for c in m.restore(m.piecewise(pieces))) == "Pulse aquí para ver %s ahora ❤️."


def test_runs_assignment():
    """Styled chunks go to their run, base text to the base runs in order; one style: all in the first run."""
    runs = styled_runs(["The house is ", "very", " big."], ["plain", "bold", "plain"])
    assert [s for _, s in runs] == [False, True, False]
    assert assign([Chunk("La casa es ", None), Chunk("muy", 1), Chunk(" grande.", None)], runs) == [
        "La casa es ",
        "muy",
        " grande.",
    ]
    same = styled_runs(["Good ", "morning."], ["a", "a"])
    assert assign([Chunk("Buenos días.", None)], same) == ["Buenos días.", ""]


def test_split_layout():
    """/translate: spans become literal pieces of the layout; HTML literals stay escaped."""
    find = lambda t: find_spans(t, spells, placeholders=True)
    layout = split_layout(plain_layout("Hello %s, you have {n} messages ❤️", False), find)
    assert layout.units == ["Hello", "you have", "messages"]
    assert layout.join(["Hola", "tienes", "mensajes"]) == "Hola %s, tienes {n} mensajes ❤️"
    html = split_layout(html_layout("<p>Tom &amp; %s</p>", False), find)
    assert html.join([t.upper() for t in html.units]) == "<p>TOM &amp; %s</p>"


def test_builtin_translate_keeps(builtin):
    """/translate on the built-in model: emoji and control characters pass through; placeholders when asked."""
    out = ok(builtin.url, UNSPELLABLE)["translatedText"]
    for text, keep in zip(out, KEEP_ORDER, strict=True):
        assert keep in text, out
    q = ["Hello %s, you have {count} new messages.", "You have {n, plural, one {# file} other {# files}}."]
    kept = ok(builtin.url, q, preserve_placeholders=True)["translatedText"]
    assert "%s" in kept[0] and "{count}" in kept[0] and "{n, plural, one {# file} other {# files}}" in kept[1]
    r = ok(builtin.url, "I ❤️ Paris", stream=False, format="html")
    assert "❤️" in r["translatedText"]


def test_builtin_stream_keeps(builtin):
    """A streamed translation carries the kept characters in its token events."""
    body = {"q": "I ❤️ Paris", "source": "en", "target": "es", "stream": True}
    with HTTP.stream("POST", builtin.url + "/translate", json=body, timeout=60) as r:
        events = parse_sse(r.read().decode())
    assert "❤️" in "".join(e.data["token"]["text"] for e in events if e.event == "token")
    assert "❤️" in events[-1].data["translatedText"]


@pytest.mark.parametrize("target", ["fr", "de"])
def test_families_keep(families, target):
    """The shared server's tiny OPUS-MT (en-fr) and NLLB (en-de), neither with byte-fallback pieces: what their
    vocabularies cannot spell passes through /translate and documents unchanged."""
    out = ok(families.url, UNSPELLABLE, target=target, parameters={"max_new_tokens": 8})["translatedText"]
    for text, keep in zip(out, KEEP_ORDER, strict=True):
        assert keep in text, out
    data = translate_file(families.url, "a.txt", "\n".join(UNSPELLABLE).encode(), target=target)
    for line, keep in zip(data.decode().splitlines(), KEEP_ORDER, strict=True):
        assert keep in line
