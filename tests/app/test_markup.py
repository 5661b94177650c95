"""Markup that costs nothing (issue 48): inline tags leave the model's text and go back by the decoder's alignment.
Placement on given alignments, the layout's cut, and a real server of the built-in model (the oracle: the output with
its tags stripped is the plain translation of the text without them)."""

from __future__ import annotations

import re

import pytest

from app.inline import Tag, Tagged, pair_tags, place
from app.inline_words import WORD, Words
from app.text import html_layout
from bench.markup import strip, tags_exact
from tests.app.helpers import check_stream, ok

TAG = re.compile(r"<[^<>]+>")


def words(text: str, tokens: list[int | None]) -> Words:
    """A text's words, one token per word (tokens[k]: the word of token k)."""
    return Words(text, [m.span() for m in WORD.finditer(text)], tokens)


def tagged(markup: str) -> Tagged:
    """A sentence's plain text and tags (test markup: tags named by their first letters)."""
    text, tags = "", []
    for part in re.split(r"(<[^<>]+>)", markup):
        if part.startswith("<"):
            kind = "close" if part[1] == "/" else "void" if part.endswith("/>") else "open"
            tags.append(Tag(part, kind, len(text), re.match(r"</?(\w+)", part).group(1)))
        else:
            text += part
    assert pair_tags(tags)
    return Tagged(text, tags)


def placed(markup: str, output: str, points: list[int]) -> tuple[str, int]:
    """Place the tags of `markup` in `output`, target word j aligned to source word points[j]."""
    t = tagged(markup)
    n = len(WORD.findall(t.text))
    src = words(t.text, list(range(n)) + [None])
    out = words(output, list(range(len(WORD.findall(output)))))
    result = place(t, src, out, points)
    return result.text, result.fallbacks


def test_tags_go_around_the_aligned_words_reordered():
    """An element goes around the target words aligned to the words it enclosed, wherever they moved."""
    got = placed('The <a href="/h?a=1&amp;b">red</a> car.', "El coche rojo.", [0, 2, 1, 3])
    assert got == ('El coche <a href="/h?a=1&amp;b">rojo</a>.', 0)


def test_nested_and_two_elements_stay_nested():
    """Nested elements nest in the output; two sibling elements do not overlap even when the alignment is noisy."""
    text, fallbacks = placed("A <em>very <b>old</b></em> bridge.", "Un puente muy viejo.", [0, 3, 1, 2, 4])
    assert text == "Un puente <em>muy <b>viejo</b></em>." and fallbacks == 0
    text, _ = placed("<i>new</i> <b>rules</b> apply", "reglas nuevas aplican", [0, 0, 2])  # both on "new"
    assert tags_exact("<i>new</i> <b>rules</b> apply", text)


def test_scattered_words_get_the_smallest_covering_span():
    """An element whose words scatter goes around the smallest span covering them."""
    got, _ = placed("I <b>gave up</b> now.", "Yo ya me rendí.", [0, 1, 3, 2])
    assert got == "Yo <b>ya me rendí</b>."


def test_standalone_tag_goes_after_the_word_aligned_to_the_word_before_it():
    """<br/> goes after the target word aligned to the source word before it."""
    assert placed("big<br/> house", "casa grande", [1, 0]) == ("casa grande<br/>", 0)


def test_a_tag_alignment_cannot_place_is_counted():
    """Words aligned to nothing: the tag still goes in (by proportion), counted as a fallback."""
    text, fallbacks = placed("The <b>cat</b> sleeps.", "El gato duerme.", [])
    assert tags_exact("The <b>cat</b> sleeps.", text) and fallbacks == 1


def test_layout_keeps_inline_tags_in_their_sentence():
    """format html: inline tags stay in the sentence's unit (its text plain), block tags and tags around a whole
    sentence stay literal."""
    layout = html_layout('<p><b>All.</b> The <a href="/x">help page</a> works.</p>', True, inline=True)
    assert layout.units == ["All.", "The help page works."]
    assert "<b>" in layout.pieces and "</b>" in layout.pieces and list(layout.tagged) == [1]
    assert [t.text for t in layout.tagged[1].tags] == ['<a href="/x">', "</a>"]
    assert html_layout("<p>The <b>cat</b></p>", True).units == ["The", "cat"]  # documents' HTML: unchanged


SNIPPETS = [
    'The <a href="/help" title="a &quot;b&quot;">help page</a> explains how to install the program.',
    "Open the <em>settings</em> and choose a <strong>new password</strong>.",
    'This is a <span class="x">very important</span> message for all users.',
    "<p>This <em>very <b>expensive</b></em> watch is a gift. <i>Read</i> the card.</p>",
    "<b>Warning:</b> the file is large.",
    "Name: John<br>City: London",
]


@pytest.mark.parametrize("markup", SNIPPETS)
def test_markup_costs_nothing(builtin, markup):
    """Tags kept byte for byte and nested; the text is the plain translation of the text without tags; every tag
    placed by alignment."""
    answer = ok(builtin.url, markup, format="html")
    text = answer["translatedText"]
    assert tags_exact(markup, text)
    assert strip(text) == " ".join(ok(builtin.url, strip(markup))["translatedText"].split())
    assert answer["details"]["markup_fallbacks"] == 0


def test_markup_places_tags_on_the_built_in_model(builtin):
    """Known placements of the built-in model (reordering, nesting, a line break)."""
    got = ok(builtin.url, [SNIPPETS[0], SNIPPETS[3], SNIPPETS[5]], format="html")["translatedText"]
    assert got[0].startswith('La <a href="/help" title="a &quot;b&quot;">página de ayuda</a> explica')
    assert "<em>muy <b>caro</b></em>" in got[1]
    assert re.search(r"John<br>\s*Ciudad", got[2])


def test_markup_streams_each_unit_once_placed(builtin):
    """Streaming: the deltas add up to the JSON answer; a unit's text arrives with its tags."""
    events = check_stream(builtin.url, SNIPPETS[3], format="html", parameters={"split_sentences": True})
    deltas = [e.data["token"]["text"] for e in events if e.event == "token"]
    assert any("<em>" in d and "</em>" in d for d in deltas)


def test_kept_spans_inside_fall_back_counted(builtin):
    """A placeholder inside a sentence with inline tags: today's way (text between tags apart), counted."""
    answer = ok(builtin.url, "Hello <b>{name}</b>, your order %d is ready.", format="html", preserve_placeholders=True)
    assert "{name}" in answer["translatedText"] and "%d" in answer["translatedText"]
    assert answer["details"]["markup_fallbacks"] == 2


def test_a_child_stays_inside_its_parent_when_the_alignment_pulls_it_out():
    """The parent trimmed clear of a sibling: its child is kept inside it (by proportion, counted)."""
    assert placed("<i>x</i> <b>y <u>z</u></b>", "A B C", [1, 0, 2]) == ("<b><u>A</u></b> <i>B</i> C", 1)


def random_markup(rng, depth: int = 0) -> str:
    """Random text with inline, block and standalone elements, nested."""
    out = []
    for _ in range(rng.randint(1, 5)):
        r = rng.random()
        if r < 0.5 or depth > 2:
            out.append(rng.choice("the cat sleeps big red house. dog runs & eats fast! who? yes".split()) + " ")
        elif r < 0.7:
            name, attrs = rng.choice([("b", ""), ("a", " href='x'"), ("span", ' class="q"'), ("em", "")])
            out.append(f"<{name}{attrs}>{random_markup(rng, depth + 1)}</{name}>")
        elif r < 0.8:
            out.append(rng.choice(["<br>", "<br/>", "<img src=x>", "<x id='1'/>"]))
        else:
            out.append(f"<p>{random_markup(rng, depth + 1)}</p>")
    return "".join(out)


def test_random_markup_keeps_every_tag_nested_whatever_the_alignment():
    """Any nested markup, cut into sentences, translated into shuffled words with a random alignment: every tag
    comes back once, byte for byte, nested."""
    import random

    rng = random.Random(7)
    for _ in range(600):
        markup = random_markup(rng)
        layout = html_layout(markup, rng.random() < 0.5, inline=True)
        outs = []
        for u, text in enumerate(layout.units):
            words_out = text.upper().split()
            rng.shuffle(words_out)
            target = " ".join(words_out)
            n = len(WORD.findall(text))
            out = words(target, list(range(len(WORD.findall(target)))))
            alignment = [rng.randint(-1, n + 1) for _ in out.spans]
            t = layout.tagged.get(u)
            outs.append(place(t, words(text, [*range(n), None]), out, alignment).text if t else target)
        assert tags_exact(markup, layout.join(outs)), markup
