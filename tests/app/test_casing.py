"""Text in capitals or starting lower-case is translated as in sentence case and given back in its own casing;
streamed pieces come out as the whole does."""

from __future__ import annotations

import json
import shutil

import pytest

from app.casing import Casing
from bench.harness.server import ServerProcess
from model.loading.checkpoint import load
from tests.app.helpers import check_stream, offline, ok


@pytest.fixture(scope="module")
def sentence_case(native_dir, tmp_path_factory, session_servers):
    """The tiny native model marked as reading sentence case (as the built-in one is), served."""
    path = tmp_path_factory.mktemp("cased") / "tiny-en-es"
    shutil.copytree(native_dir, path)
    meta = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**meta, "casing": {"en": "sentence"}}))
    session_servers.append(ServerProcess("--model", str(path), "--max-wait-ms", "5", "--warmup-rounds", "1"))
    return session_servers[-1].wait(), load(path)


@pytest.mark.parametrize(
    ("typed", "kind", "read"),
    [
        ("HELLO WORLD", "upper", "Hello world"),
        ("¡BUENOS DÍAS, ANA!", "upper", "¡Buenos días, ana!"),
        ("Hello World", "title", "Hello world"),
        ("¿Dónde Está Mi Hotel?", "title", "¿Dónde está mi hotel?"),
        ("Installing The Package (.Deb File)", "title", "Installing the package (.deb file)"),
        ("hello world", "lower", "Hello world"),
        ("¿cómo estás?", "lower", "¿Cómo estás?"),
        ("Hello world", "", "Hello world"),
        ("NASA", "", "NASA"),  # one word in capitals: an acronym, left as typed
        ("Hello", "", "Hello"),  # one word: nothing says Title Case
        ("Open The USB Drive", "", "Open The USB Drive"),  # a word in capitals: not Title Case
        ("Hello World, I use macOS", "", "Hello World, I use macOS"),
        ("Name: John City: London", "", "Name: John City: London"),  # labels and names, not a Title Case sentence
        ("USB drive", "", "USB drive"),
        ("iPhone is here", "", "iPhone is here"),  # not a lower-case word
        ("3 apples", "", "3 apples"),  # a number first: nothing to capitalise
        ("STRASSE ß", "", "STRASSE ß"),  # changing the case would move offsets
    ],
)
def test_what_the_model_reads(typed, kind, read):
    casing = Casing.of(typed)
    assert (casing.kind, casing.model_text(typed)) == (kind, read)


@pytest.mark.parametrize(
    ("kind", "out", "back"),
    [
        ("upper", "¡Hola mundo!", "¡HOLA MUNDO!"),
        ("title", "¿Dónde está mi hotel?", "¿Dónde Está Mi Hotel?"),
        ("title", "Es el 3rd (.deb) de l'eau", "Es El 3rd (.Deb) De L'eau"),
        ("lower", "Hola mundo.", "hola mundo."),
        ("lower", "¿Cómo estás?", "¿cómo estás?"),
        ("lower", "A las tres.", "a las tres."),
        ("lower", "I am here.", "I am here."),  # English's "I" stays
        ("lower", "USB drive", "USB drive"),
        ("lower", "LibreOffice opens", "LibreOffice opens"),
        ("", "Hola mundo.", "Hola mundo."),
    ],
)
def test_translations_come_back_in_the_casing_typed(kind, out, back):
    assert Casing(kind).restore(out) == back


@pytest.mark.parametrize("kind", ["upper", "title", "lower"])
@pytest.mark.parametrize(
    "out", ["Hola mundo.", "I am here.", "A las tres.", "USB drive", "  Ana vino", "¿Qué?", "Straße", ""]
)
def test_streamed_pieces_add_up_to_the_whole(kind, out):
    for cut in range(len(out) + 1):  # every place the first piece can end, the rest in ones
        pieces = [out[:cut], *out[cut:]]
        casing = Casing(kind)
        streamed = "".join(casing.stream(p, last=i == len(pieces) - 1) for i, p in enumerate(pieces))
        assert streamed == Casing(kind).restore(out), (pieces, streamed)


def test_the_server_translates_every_casing_as_sentence_case(sentence_case, server, checkpoint):
    """On the real server (a tiny random model that reads sentence case): capitals are the sentence-case
    translation in capitals, lower case its translation from a lower-case first letter; streamed as answered. A
    model that does not ask for it (a Hugging Face one, the tiny model as made) reads the text as typed."""
    cased, ck = sentence_case
    texts = ["The cat sleeps", "THE CAT SLEEPS", "the cat sleeps", "The Cat Sleeps"]
    plain, upper, lower, title = ok(cased.url, texts)["translatedText"]
    assert upper == plain.upper() and upper != plain
    assert lower == Casing("lower").restore(plain)
    assert title == Casing("title").restore(plain) and title != plain
    for text in texts[1:]:
        check_stream(cased.url, text)
    assert ck.casing == {"en": "sentence"} and not checkpoint.casing
    as_typed = ok(server.url, texts)["translatedText"]
    assert as_typed == [offline(checkpoint, t)[0] for t in texts] and as_typed[1] != as_typed[0].upper()
    assert as_typed[3] != Casing("title").restore(as_typed[0])


def test_a_glossary_term_in_a_text_typed_in_capitals_or_title_case(sentence_case):
    # catches: a term matched or forced on the text as typed (its token spans then point at other tokens), or a
    # report saying "not applied" of a term that stands in the output in the capitals the text was typed in
    cased, _ = sentence_case
    texts = ["THE DOG RUNS IN THE CITY", "the dog runs in the city", "The Dog Runs In The City"]
    answer = ok(cased.url, texts, glossary=[["dog", "perro"]])
    upper, lower, title = answer["translatedText"]
    assert "PERRO" in upper.split() and "perro" in lower.split() and "Perro" in title.split(), answer
    assert [[e["applied"] for e in d["glossary"]] for d in answer["details"]] == [[True], [True], [True]]


def test_a_language_read_in_sentence_case_only_in_capitals():
    assert Casing.of("hello world", "capitals").kind == "" and Casing.of("HELLO WORLD", "capitals").kind == "upper"
    assert Casing.of("Hola Mundo", "capitals").kind == "title" and Casing.of("Hola Mundo", "").kind == ""
    assert Casing.of("HELLO WORLD", "").kind == ""
