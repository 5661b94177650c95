"""Text units: sentence splitting and the HTML layout (markup verbatim, text nodes as units, joined back)."""

from __future__ import annotations

import pytest

from app.text import html_layout, plain_layout


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("The cat sleeps. The dog runs.", ["The cat sleeps.", "The dog runs."]),
        ("Really?! Yes… Fine.", ["Really?!", "Yes… Fine."]),  # an ellipsis inside a sentence
        ('He said "Go." Then he left.', ['He said "Go."', "Then he left."]),
        ("Es así. ¿Vienes? ¡Claro!", ["Es así.", "¿Vienes?", "¡Claro!"]),
        ("Done.\n\nNext line.", ["Done.", "Next line."]),
        ("It costs 3.50 today. Ok.", ["It costs 3.50 today.", "Ok."]),
        ("See e.g. the cat. It sleeps.", ["See e.g. the cat.", "It sleeps."]),  # abbreviations do not end one
        ("Dr. Smith arrived at 5 p.m. yesterday.", ["Dr. Smith arrived at 5 p.m. yesterday."]),
        (
            "Mr. Brown met Mrs. Green in Washington D.C. on Monday.",
            ["Mr. Brown met Mrs. Green in Washington D.C. on Monday."],
        ),
        ("No stop at the end", ["No stop at the end"]),
        ("Chapter 1. 2 cats.", ["Chapter 1.", "2 cats."]),
    ],
)
def test_sentence_split(text, units):
    """Sentences as sentencex cuts them (abbreviations stay inside); the layout joins back to the text."""
    layout = plain_layout(text, split=True)
    assert layout.units == units
    assert layout.join(layout.units) == text


def test_without_split_the_text_is_one_unit():
    """No split: one unit, surrounding whitespace kept literally."""
    layout = plain_layout("  The cat sleeps. The dog runs.\n", split=False)
    assert layout.units == ["The cat sleeps. The dog runs."]
    assert layout.pieces == ["  ", 0, "\n"]
    assert layout.join(["A. B."]) == "  A. B.\n"


def test_join_puts_translations_between_separators():
    """Translations replace units; separators (spaces, newlines, quotes) stay."""
    layout = plain_layout(' "Hi." Then.\nBye! ', split=True)
    assert layout.units == ['"Hi."', "Then.", "Bye!"]
    assert layout.join(["A", "B", "C"]) == " A B\nC "
    assert layout.render("<x>") == "<x>"  # plain text is not escaped


ROUND_TRIP = [
    "<p>Hello <b>world</b>!</p>",
    "<P CLASS=\"A\" data-x='y'>Upper case</P >",
    "<!DOCTYPE html><html><head><title>T</title></head><body>x</body></html>",
    "<script>if (a < b && c) { s = '<p>text</p>'; }</script><p>after</p>",
    "<style>p > a { color: red }</style>Text",
    "<code>a &lt; b &amp;&amp; c</code> and <pre>  x &gt; y  </pre>",
    "<textarea>raw &amp; <b>kept</b></textarea>",
    "<!-- a comment --><p>x</p><![CDATA[ data ]]>",
    "<br/><img src='a.png' alt=\"An image\"><hr>",
    "<p>multi\nline</p\n>",
    "<ul>\n  <li>One</li>\n  <li>Two</li>\n</ul>\n",
    "no markup at all",
    "<p>unclosed",
    "<div><code>nested <b>code &amp; tags</b></code> text</div>",
]


@pytest.mark.parametrize("markup", ROUND_TRIP)
def test_html_round_trip(markup):
    """Joining the units untranslated gives back the markup byte for byte."""
    layout = html_layout(markup, split=False)
    assert layout.join(layout.units) == markup
    assert html_layout(markup, split=True).join(html_layout(markup, split=True).units) == markup


def test_html_units_are_text_nodes_only():
    """Units are the text nodes outside script/style/code/pre/textarea; attributes and comments are not units."""
    markup = (
        '<p title="not me">Hello <b>world</b></p><script>var x = "no";</script><code>no</code>'
        "<!-- no --><pre>no</pre><textarea>no</textarea><style>.no{}</style><i>yes</i>"
    )
    assert html_layout(markup, split=False).units == ["Hello", "world", "yes"]


def test_html_skip_tags_nest():
    """Text after a skipped element is translated again; inside nested skipped elements it is not."""
    layout = html_layout("<pre><code>a</code> b</pre> c <code>d</code>e", split=False)
    assert layout.units == ["c", "e"]


def test_html_entities_reach_the_model_decoded_and_come_back_escaped():
    """Text units are unescaped; translations are escaped when joined (markup-looking output cannot inject tags)."""
    layout = html_layout("<p>Tom &amp; Jerry &lt;3</p>", split=False)
    assert layout.units == ["Tom & Jerry <3"]
    assert layout.join(["<b>Tom</b> & Jerry"]) == "<p>&lt;b&gt;Tom&lt;/b&gt; &amp; Jerry</p>"


def test_html_text_around_inline_tags_and_sentences():
    """Text runs are cut at tags; with split, sentences inside a run become units of their own."""
    layout = html_layout("<p>One. Two <b>three</b>. Four!</p>", split=True)
    assert layout.units == ["One.", "Two", "three", ".", "Four!"]
    assert layout.join(["1", "2", "3", "4", "5"]) == "<p>1 2 <b>3</b>4 5</p>"


def test_html_without_text_has_no_units():
    """All-markup input has nothing to translate."""
    for markup in ("<br>", "<p> </p>", "<!-- x --><hr/>", ""):
        layout = html_layout(markup, split=True)
        assert layout.units == []
        assert layout.join([]) == markup
