"""The shipped model serves en->es and es->en (one network, the target's token before the source) and translates the
everyday phrases both ways: a broken export cannot land; its glossary terms stand where their source words are
translated."""

import dataclasses
import re
from functools import partial

import pytest
import sacrebleu
import torch

from app.casing import Casing
from app.glossaries.agreement import SOURCES, Agreeing
from app.glossaries.apply import GlossaryUse
from app.glossaries.lexicon import lexicon
from app.glossaries.plurals import Plurals
from app.settings import BUILTIN
from model.loading.checkpoint import load
from model.runner.agreement import likelihoods, probe
from model.runner.agreement import redo as agree
from model.runner.constraints import Words
from model.runner.eager import Eager
from model.runner.fallback import missing, redo
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request
from tests.app.glossaries.test_lexicon import needs_analyser
from training.common import EVERYDAY, EVERYDAY2, read_tsv  # hand-written phrases, never trained on
from training.vocab import ALWAYS

# The shipped model scores chrF 80.6 en->es and 79.0 es->en (greedy) on EVERYDAY; the floors sit 5 points below.
# Copying the English scores 12.6, and a broken export (wrong vocabulary, wrong weights, fp16 overflow) 0-20.
CHRF_FLOOR = 75.6
CHRF_FLOOR_ES = 74.0
README_EXAMPLES = {  # what README.md shows them translating to (held out of training: they are everyday phrases)
    "Hello.": "Hola.",
    "Good morning.": "Buenos días.",
    "Where is the station?": "¿Dónde está la estación?",
    "The house is big.": "La casa es grande.",
}
SPANISH_WORDS = {"el", "la", "los", "las", "es", "de", "un", "una", "en", "y", "que", "está", "del", "por", "no"}
ENGLISH_WORDS = {"the", "a", "is", "are", "i", "you", "it", "to", "of", "in", "and", "do", "not", "my", "we"}


def translate_all(ck, texts: list[str], source: str, target: str) -> list[str]:
    """Greedy translations of `texts` as the server asks for them (the target's token first)."""
    prefix = ck.languages.prefix(source, target)
    reqs = [Request(i, prefix + ck.tokenizer.encode(t), DecodeParams(max_new_tokens=64)) for i, t in enumerate(texts)]
    with torch.inference_mode():
        return [ck.tokenizer.decode(h[0].tokens) for h in generate(ck.model, reqs)]


@pytest.fixture(scope="module")
def checkpoint():
    return load(BUILTIN)


@pytest.fixture(scope="module")
def everyday(checkpoint):
    """(English, reference, greedy translation) of every everyday phrase."""
    ck = checkpoint
    assert (ck.name, ck.source_lang, ck.target_lang) == ("en-es", "mul", "mul")
    pairs = read_tsv(EVERYDAY)
    hyps = translate_all(ck, [en for en, _ in pairs], "en", "es")
    return [(en, es, hyp) for (en, es), hyp in zip(pairs, hyps, strict=True)]


@pytest.fixture(scope="module")
def everyday_es(checkpoint):
    """(Spanish, English reference, greedy translation) of every everyday phrase, the other way."""
    pairs = read_tsv(EVERYDAY)
    hyps = translate_all(checkpoint, [es for _, es in pairs], "es", "en")
    return [(es, en, hyp) for (en, es), hyp in zip(pairs, hyps, strict=True)]


def test_everyday_phrases_are_a_real_test_set(everyday):
    assert len(everyday) >= 150 and len({en for en, _, _ in everyday}) == len(everyday)
    second = read_tsv(EVERYDAY2)  # the independent set: other phrases (casing variants of a few first ones)
    assert len(second) >= 60 and not {en for en, _ in second} & {en for en, _, _ in everyday}
    assert sum(es.startswith("¿") for _, es, _ in everyday) >= 30  # questions, written the Spanish way
    assert sum(es.startswith("¡") for _, es, _ in everyday) >= 10


def test_builtin_model_scores_above_its_floor_on_everyday_phrases(everyday):
    chrf = sacrebleu.corpus_chrf([h for _, _, h in everyday], [[es for _, es, _ in everyday]]).score
    assert chrf >= CHRF_FLOOR, (chrf, everyday[:20])
    words = [w.strip(".,¿?¡!").lower() for _, _, h in everyday for w in h.split()]
    assert sum(w in SPANISH_WORDS for w in words) >= len(everyday) // 2, everyday[:20]  # Spanish, not copied English


def test_builtin_model_serves_both_ways_and_only_between_two_languages(checkpoint):
    langs = checkpoint.languages
    assert sorted(langs.pairs()) == [("en", "es"), ("es", "en")]
    assert not langs.serves("en", "en") and not langs.serves("es", "es")
    assert langs.prefix("en", "es") != langs.prefix("es", "en")  # one target-language token each
    assert all(checkpoint.tokenizer.decode(langs.prefix("en", t)) == "" for t in ("es", "en"))  # never in the text


def test_builtin_model_scores_above_its_floor_from_spanish(everyday_es):
    chrf = sacrebleu.corpus_chrf([h for _, _, h in everyday_es], [[en for _, en, _ in everyday_es]]).score
    assert chrf >= CHRF_FLOOR_ES, (chrf, everyday_es[:20])
    words = [w.strip(".,¿?¡!").lower() for _, _, h in everyday_es for w in h.split()]
    assert sum(w in ENGLISH_WORDS for w in words) >= len(everyday_es) // 2, everyday_es[:20]  # English, not Spanish


def as_served(ck, texts: list[str], source: str, target: str) -> list[str]:
    """`translate_all` as the server reads each text: in sentence case, given back in the casing it was typed in."""
    casings = [Casing.of(t, ck.casing.get(source, "")) for t in texts]
    hyps = translate_all(ck, [c.model_text(t) for c, t in zip(casings, texts, strict=True)], source, target)
    return [c.restore(h) for c, h in zip(casings, hyps, strict=True)]


def test_what_people_type_first_in_any_casing(checkpoint):
    ck = checkpoint
    hello = as_served(ck, ["Hello world", "hello world", "HELLO WORLD"], "en", "es")
    assert [h.lower().strip("¡!.") for h in hello] == ["hola mundo"] * 3, hello
    back = as_served(ck, ["Hola mundo", "HOLA MUNDO", "¿Cómo estás?"], "es", "en")  # "como estas": not yet
    assert [b.lower().strip("!.") for b in back[:2]] == ["hello world"] * 2 and "how are you" in back[2].lower(), back


def test_the_vocabulary_spells_what_people_type(checkpoint):
    # catches: a character people type mapped to <unk>, which decodes to nothing ("Abrir etchosts en el editor ML."
    # before training.vocab), or its new row left untrained
    ck = checkpoint
    assert all(ck.tokenizer.spells(c) for c in ALWAYS), [c for c in ALWAYS if not ck.tokenizer.spells(c)]
    out = translate_all(ck, ["Open /etc/hosts in the XML editor.", "What a beautiful day!"], "en", "es")
    assert "/etc/hosts" in out[0] and "XML" in out[0] and out[1].startswith("¡") and out[1].endswith("!"), out


def test_readme_examples_translate_as_the_readme_shows(everyday):
    got = {en: hyp for en, _, hyp in everyday if en in README_EXAMPLES}
    assert got == README_EXAMPLES


def test_builtin_checkpoint_is_small_and_complete():
    files = {p.name: p.stat().st_size for p in BUILTIN.iterdir()}
    assert {"config.json", "model.safetensors", "spm.model", "MODEL_CARD.md"} <= set(files)
    assert sum(files.values()) < 30_000_000


GLOSSARY_CASES = [  # (English, term, target): failures of the unplaced constrained search (issue 42)
    ("My boss is on holiday.", "boss", "jefa"),  # was "Mi jefe está a las vacaciones. jefas."
    ("I left my wallet in the taxi.", "wallet", "billetera"),  # was "... mi cartera billetera en el taxi."
    ("Put the keys on the shelf.", "shelf", "repisa"),  # was "Pone repisa las teclas en la balda."
    ("The picture is on the wall.", "picture", "foto"),  # was "El foto ..."
    ("Save the file and close the file.", "file", "fichero"),  # wanted twice
    ("The file could not be saved.", "file", "fichero"),  # was "El fichero no se pudo guardar el archivo."
    ("The lake freezes in winter.", "lake", "laguna"),  # was "El lago laguna ..." (started at "The")
]


def shifted(spans: list[tuple[int, ...]], prefix: list[int]) -> tuple[tuple[int, ...], ...]:
    """Token spans of the text moved past the language tokens before it (as the planner shifts them)."""
    return tuple(tuple(k + len(prefix) for k in span) for span in spans)


def test_glossary_terms_stand_where_their_source_is_translated(checkpoint):
    # catches: a term appended after the sentence, beside the word it replaces, not a whole word, once for two
    ck = checkpoint
    tok, words = ck.tokenizer, Words.of(ck.tokenizer.target_pieces(ck.config.tgt_vocab_size), torch.device("cpu"))
    prefix, reqs = ck.languages.prefix("en", "es"), []
    for i, (en, term, target) in enumerate(GLOSSARY_CASES):
        found = [(m.start(), m.end()) for m in re.finditer(rf"\b{term}\b", en)]
        spans = shifted(tok.source_spans(en, found, lead=1), prefix)
        wanted = (tuple(tok.encode_target(target)),) * len(found)
        params = DecodeParams(max_new_tokens=64).constrained(wanted, spans=spans)
        reqs.append(Request(i, prefix + tok.encode(en), params))
    with torch.inference_mode():
        outs = [tok.decode(h[0].tokens) for h in generate(ck.model, reqs, words=words)]
    for (en, term, target), out in zip(GLOSSARY_CASES, outs, strict=True):
        assert len(re.findall(rf"(?<!\w){target}(?!\w)", out)) == en.count(term), out
        assert out.endswith(".") and out.count(".") == 1, out  # nothing after the sentence's end
    assert "cartera" not in outs[1] and "balda" not in outs[2] and "La foto" in outs[3], outs
    assert "archivo" not in outs[5], outs  # the term's source not translated again after the term
    assert "lago" not in outs[6], outs  # the term started at its own word, not at the word before it


def test_a_term_whose_window_passed_is_forced_where_its_source_aligns(checkpoint):
    # catches: a missed term left out (or appended), or a retry that changes the words before the term's place
    ck = checkpoint
    tok, runner, prefix = ck.tokenizer, Eager(ck.model), ck.languages.prefix("en", "es")
    words = Words.of(tok.target_pieces(ck.config.tgt_vocab_size), torch.device("cpu"))
    en = "My boss sent me the schedule on Telegram."
    terms = tuple(tuple(tok.encode_target(t)) for t in ("jefa", "Telegram"))
    spans = shifted(tok.source_spans(en, [(3, 7), (en.index("Telegram"), len(en) - 1)], lead=1), prefix)
    params, src = DecodeParams(max_new_tokens=64).constrained(terms, spans=spans), prefix + tok.encode(en)
    with torch.inference_mode():  # the model's own output, as a decode whose window passed would end
        first = generate(runner, [Request(0, src, DecodeParams(max_new_tokens=64))], words=words)[0][0]
        assert missing(params, first.tokens) == 0  # this model writes its own "Mi jefe me envió ..."
        again = redo(runner, words.starts.tolist(), src, params, first.tokens)
        second = generate(runner, [Request(0, src, again)], words=words)[0][0]
    out = tok.decode(second.tokens)
    assert out.startswith("Mi jefa ") and "jefe" not in out and out.count("jefa") == 1, out
    assert missing(again, second.tokens) is None and redo(runner, [], src, again, second.tokens) is None


def test_a_glance_at_the_source_end_inside_a_word_does_not_close_a_terms_window(checkpoint):
    # catches: the window of "router" passed while the model wrote "Reinic|ia|r" looking at the source's EOS (the
    # model's own "Reiniciar el enrutador" lost: "Restar enrutador y intentar de nuevo.")
    assert agreed(checkpoint, "Restart the router and try again.", "router", "enrutador")[-1].startswith(
        "Reiniciar el enrutador"
    )


def test_a_hypothesis_that_lost_a_term_ranks_in_a_lower_bank(checkpoint):
    # catches: "El servidor no pudo encontrar la base de base de datos.": "No se pudo ... la base de datos" (it let
    # "servidor" pass) shared the fullest bank with "El servidor ... la base de dato", and took the last place
    entries = (("server", "servidor"), ("database", "base de datos"))
    out = glossed(checkpoint, "The server could not find the database.", entries, lexicon("es"))
    assert out == "El servidor no pudo encontrar la base de datos.", out


@pytest.mark.parametrize(
    "en, term, target, wanted",
    [
        ("Settings can be changed at any time.", "settings", "ajustes", "Los ajustes pueden "),  # was "Ajustes pueden"
        pytest.param(
            "Updates are installed at night.", "updates", "parches", "Los parches ",  # was "Parches están"
            marks=pytest.mark.xfail(strict=True, reason="issue 42: the two-way model's 'Parches están instalados'"),
        ),
        ("Settings", "settings", "ajustes", "Ajustes"),  # a heading: bare
        ("Files deleted.", "file", "fichero", "Ficheros "),  # a status line: bare
    ],
)
def test_a_plural_that_opens_a_sentence_gets_its_article(checkpoint, en, term, target, wanted):
    # catches: a bare plural subject ("Ajustes pueden ser cambiados"), or an article given to a heading or status line
    out = glossed(checkpoint, en, ((term, target),), lexicon("es"))
    assert out.startswith(wanted), out


@pytest.mark.parametrize(
    "en, term, target, wanted",
    [
        ("Change the font size.", "font", "fuente", r"el tamaño (del tipo )?de (la )?fuente\.$"),  # not "tamaño fuente"
        ("Open the file menu.", "file", "fichero", r"el menú de(l)? fichero\.$"),  # was "el menú fichero"
    ],
)
def test_a_forced_term_keeps_the_word_that_joins_it_to_the_sentence(checkpoint, en, term, target, wanted):
    # catches: a missed term forced at the first word aligned to its source, "de" of the model's "de letra" among them
    out = glossed(checkpoint, en, ((term, target),), lexicon("es"))
    assert re.search(wanted, out), out


@pytest.mark.parametrize(
    "en, term, target",
    [
        ("Move the photos to a new folder.", "folder", "carpeta"),  # was "una nueva carpeta"
        ("The kitchen has a big window.", "window", "ventana"),  # was "una pequeña ventana" (big!)
        ("The old car is in the garage.", "car", "coche"),
    ],
)
def test_a_term_that_is_the_models_own_word_changes_nothing(checkpoint, en, term, target):
    # catches: a noun held back while the decoder still looks at the adjective before it in the source (the term
    # started only where the decoder looked at its own words): the beam wrote the adjective first
    src = checkpoint.languages.prefix("en", "es") + checkpoint.tokenizer.encode(en)
    with torch.inference_mode():  # the beam a request with a term decodes with
        plain = generate(checkpoint.model, [Request(0, src, DecodeParams(beam_size=4, max_new_tokens=64))])[0][0]
    assert glossed(checkpoint, en, ((term, target),), None) == checkpoint.tokenizer.decode(plain.tokens)


def glossed(ck, en: str, entries: tuple[tuple[str, str], ...], analyser) -> str:
    """The output of `en` with a glossary as the planner uses it (its matching and plurals, agreement, retries)."""
    tok, runner = ck.tokenizer, Eager(ck.model)
    words = Words.of(tok.target_pieces(ck.config.tgt_vocab_size), torch.device("cpu"))
    agreeing = Agreeing("es", SOURCES["en"], tok.encode, tok.encode_target, lexicon=analyser)
    use = GlossaryUse(entries, tok.encode_target, 7, agreeing=agreeing, plurals=Plurals.of("en", "es", analyser))
    cons, chars = use.constraints(en)
    prefix = ck.languages.prefix("en", "es")  # as the server asks: the target's token first, spans shifted past it
    spans = shifted(tok.source_spans(en, chars, lead=1), prefix)
    params = DecodeParams(max_new_tokens=64).constrained(cons, spans=spans)
    params, src = dataclasses.replace(params, agreement=use.agreement(en)), prefix + tok.encode(en)
    likely = partial(lambda src, seqs: likelihoods(runner, [(tuple(src), s) for s in seqs]), src)
    with torch.inference_mode():
        while params is not None:
            out = generate(runner, [Request(0, src, params)], words=words)[0][0].tokens
            params = redo(runner, words.starts.tolist(), src, params, out, words.joins.tolist(), likely) or agree(
                params, out, partial(probe, runner), likely
            )
    return tok.decode(out)


@pytest.mark.parametrize("with_analyser", [True, False])
def test_a_singular_entry_translates_the_texts_plural_in_the_plural(checkpoint, with_analyser):
    # catches: the text's plural left to the model ("Las teclas están en la balda." for shelf -> repisa), given the
    # singular term ("en la repisa") or a singular article ("en la repisas")
    analyser = lexicon("es") if with_analyser else None
    if with_analyser and analyser is None:
        pytest.skip("no Spanish morphological analyser (apertium-eng-spa)")
    out = glossed(checkpoint, "The keys are on the shelves.", (("shelf", "repisa"),), analyser)
    assert "en las repisas" in out, out


@needs_analyser
def test_a_plural_the_analyser_does_not_know_takes_a_plural_article(checkpoint):
    # catches: "El ventanales están abiertos." (the plural made from a singular entry: its number is known)
    out = glossed(checkpoint, "The windows are open.", (("window", "ventanal"),), lexicon("es"))
    assert out.startswith("Los ventanales "), out


AGREEMENT_CASES = [  # (English, term, target, wanted): the word before the term agrees with it, and the words after
    ("He bought a yellow umbrella.", "umbrella", "sombrilla", "una sombrilla amarilla"),  # was "un sombrilla amarillo"
    ("Take the umbrellas to the beach.", "umbrellas", "sombrillas", "las sombrillas"),  # was "los sombrillas"
    ("My new boss is very young.", "boss", "jefa", "Mi nueva jefa"),  # was "Mi nuevo jefa": an adjective before it
    ("I need new glasses.", "glasses", "anteojos", "Necesito nuevos anteojos"),  # was "nuevo": an adjective alone
]


def agreed(ck, en: str, term: str, target: str, lexicon=None) -> list[str]:
    """The outputs of `en` with one glossary term, each retry's (a term's window missed, a word disagreeing)."""
    tok, runner = ck.tokenizer, Eager(ck.model)
    words = Words.of(tok.target_pieces(ck.config.tgt_vocab_size), torch.device("cpu"))
    agreeing = Agreeing("es", SOURCES["en"], tok.encode, tok.encode_target, lexicon=lexicon)
    at, prefix = en.index(term), ck.languages.prefix("en", "es")
    spans = shifted(tok.source_spans(en, [(at, at + len(term))], lead=1), prefix)
    params = DecodeParams(max_new_tokens=64).constrained((tuple(tok.encode_target(target)),), spans=spans)
    params = dataclasses.replace(params, agreement=agreeing([(term, target, False)]))
    outs, src = [], prefix + tok.encode(en)
    likely = partial(lambda src, seqs: likelihoods(runner, [(tuple(src), s) for s in seqs]), src)
    with torch.inference_mode():
        while params is not None:
            outs.append(generate(runner, [Request(0, src, params)], words=words)[0][0].tokens)
            params = redo(runner, words.starts.tolist(), src, params, outs[-1], words.joins.tolist()) or agree(
                params, outs[-1], partial(probe, runner), likely
            )
    return [tok.decode(o) for o in outs]


def test_the_word_before_a_term_is_made_to_agree_with_it():
    # catches: the determiner the model wrote for its own word left before the term, or swapped without decoding the
    # words after the term again (the adjective keeps the old gender)
    ck = load(BUILTIN)
    retried = 0
    for en, term, target, wanted in AGREEMENT_CASES:
        outs = agreed(ck, en, term, target)
        assert len(outs) <= 2 and wanted in outs[-1], outs
        retried += len(outs) == 2
    assert retried, "no case needed the agreement's retry: it is not tested here"


LEXICON_CASES = [  # (English, term, target, without the analyser, with it): genders this model does not know
    # ("We saw a good movie.", "filme": run5 wrote "una filme buena" without the analyser; run6 "un filme bueno")
    ("We walked to the lake.", "lake", "laguna", "al laguna", "a la laguna"),  # beats the model's "el lago"
    ("The room has a big window.", "window", "ventanal", "una ventanal", "un ventanal"),  # unknown to it: -al
]  # fmt: skip


@pytest.mark.skipif(lexicon("es") is None, reason="no Spanish morphological analyser (Debian's apertium-eng-spa)")
@pytest.mark.parametrize("en, term, target, alone, wanted", LEXICON_CASES)
def test_the_analyser_or_the_ending_of_a_word_it_does_not_know_decides_a_terms_gender(en, term, target, alone, wanted):
    # catches: the analyser's gender ignored or outweighed by the model's own word's gender ("la ventana"), or a word
    # the analyser does not know left to the model instead of its ending
    ck = load(BUILTIN)
    plain = agreed(ck, en, term, target)
    assert len(plain) == 1 and alone in plain[0], plain  # without the analyser the model's gender stays
    outs = agreed(ck, en, term, target, lexicon("es"))
    assert len(outs) == 2 and wanted in outs[-1], outs


def test_a_word_after_a_term_that_only_follows_the_term_says_its_source_again(checkpoint):
    # catches: the echo's sign or its baseline wrong ("carro" after "El auto", which the model finds far likelier
    # than after its own "coche", not read as "car" said twice; a word the sentence needs, "está", read so), or a
    # word that would not stand in the term's place taken for the model's own ("quiere" after "Mi" for "My boss")
    from model.runner import unfinished

    ck = checkpoint
    tok, runner = ck.tokenizer, Eager(ck.model)
    vocab = unfinished.Pieces.of(Words.of(tok.target_pieces(ck.config.tgt_vocab_size), torch.device("cpu")))
    prefix = ck.languages.prefix("en", "es")
    src = [*prefix, *tok.encode("The car is parked outside.")]
    own = unfinished.own_word(runner, unfinished.own_source(src, (2, 2, 3), len(prefix)), vocab)
    assert tok.decode(list(own)) == "coche"  # "car" read alone, after the route's language token
    echo = lambda out: unfinished.echoes(runner, src, tok.encode_target(out), 1, 2, own, vocab)  # noqa: E731
    assert echo("El auto carro está aparcado fuera.")
    assert not echo("El auto está aparcado fuera.") and not echo("El auto rojo está aparcado fuera.")
    src = [*prefix, *tok.encode("My boss wants the report on Friday.")]
    mi = tok.encode_target("Mi")
    assert unfinished.stands(runner, src, mi, tuple(tok.encode_target("jefe")))
    assert not unfinished.stands(runner, src, mi, tuple(tok.encode_target("quiere")))
