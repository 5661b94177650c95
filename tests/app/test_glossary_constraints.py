"""A glossary's entries reach the engine as each unit's constraints (in process, with the engine core in a thread):
target-side token ids in word-initial form, a raised beam, only on the units that match; the cache key holds them."""

from __future__ import annotations

from app.glossaries.records import Terms
from app.planner import Ask, plan
from model.runner.params import DecodeParams, constrained_beam
from tests.app.inprocess import service_with
from tests.app.test_faults import front

GLOSSARY = {"cat": "gato negro", "dog": "perro", "Firefox": "Firefox"}


def recorded(core) -> list:
    """Wrap the core's submit so that every unit's DecodeParams is recorded, in arrival order."""
    seen = []
    submit = core.submit

    def spy(front_id, job):
        seen.extend(unit.params or job.params for unit in job.units)
        return submit(front_id, job)

    core.submit = spy
    return seen


def test_units_carry_their_own_constraints(served, checkpoint):
    # catches: constraints not sent (or sent for every unit of the job), source-side or EOS-ended ids, no raised beam
    seen = recorded(served.core)
    tok = checkpoint.tokenizer
    with front(service_with(served)) as client:
        q = ["The cat and the dog sleep.", "A bird sings.", "My CAT sleeps. The tree grows."]
        parameters = {"beam_size": 1, "split_sentences": True}
        r = client.post("/translate", json={"q": q, "source": "en", "target": "es", "glossary": GLOSSARY,
                                            "parameters": parameters})  # fmt: skip
        assert r.status_code == 200, r.text
    cat, dog = tuple(tok.encode_target("gato negro")), tuple(tok.encode_target("perro"))
    assert tok.eos_id not in cat and tok.decode(list(cat)) == "gato negro"
    assert [p.constraints for p in seen] == [(cat, dog), (), (cat,), ()]
    assert [p.beam_size for p in seen] == [constrained_beam((cat, dog)), 1, constrained_beam((cat,)), 1]
    glossaries = [d["glossary"] for d in r.json()["details"]]
    assert glossaries[1] == [] and [e["source"] for e in glossaries[0]] == ["cat", "dog"]
    for text, entries in zip(r.json()["translatedText"], glossaries, strict=True):
        assert all(e["applied"] == (e["target"] in text) for e in entries)


def test_do_not_translate_terms_keep_their_sentence_whole(served, checkpoint):
    # catches: a do-not-translate term the model can write cutting its sentence in two (the words around it lose
    # their grammar: "Encontré la respuesta Wikipedia"), or sent as the glossary's spelling instead of the text's
    seen = recorded(served.core)
    with front(service_with(served)) as client:
        r = client.post("/translate", json={"q": "I use Firefox every day", "source": "en", "target": "es",
                                            "glossary": {"firefox": "firefox"}})  # fmt: skip
    assert r.status_code == 200, r.text
    (params,) = seen  # one unit: the whole sentence
    assert params.constraints == (tuple(checkpoint.tokenizer.encode_target("Firefox")),)  # as the text writes it
    assert len(params.constraint_spans) == 1


def test_an_entrys_plural_in_the_text_is_wanted_in_the_plural(served, checkpoint):
    # catches: a singular entry that misses the text's plural ("Passwords" left to the model), or forces the singular
    # target where the text has the plural; the report naming the form wanted
    seen = recorded(served.core)
    with front(service_with(served)) as client:
        r = client.post("/translate", json={"q": "Passwords expire. Change the password.", "source": "en",
                                            "target": "es", "glossary": {"password": "contraseña"},
                                            "parameters": {"split_sentences": True}})  # fmt: skip
    assert r.status_code == 200, r.text
    encode = checkpoint.tokenizer.encode_target
    assert [p.constraints for p in seen] == [(tuple(encode("Contraseñas")),), (tuple(encode("contraseña")),)]
    assert [e["target"] for e in r.json()["details"]["glossary"]] == ["contraseñas", "contraseña"]


def test_the_cache_key_holds_the_constraints(served):
    # catches: a cache key without the glossary (a cached unconstrained answer served to a glossary request)
    # or one that changes for a glossary matching nothing in the text
    service = service_with(served)
    with front(service):
        keys = {}
        for name, entries in {"none": None, "cat": (("cat", "gato"),), "other": (("cat", "felino"),),
                              "nomatch": (("bird", "ave"),)}.items():  # fmt: skip
            terms = Terms(entries) if entries else None
            planned = plan(service, Ask("en", "es", glossary=terms), ["the cat"])
            keys[name] = planned.cache_keys(["the cat"])[0]
    assert len({keys["none"], keys["cat"], keys["other"]}) == 3
    assert keys["nomatch"] == keys["none"]  # a glossary that matches nothing changes nothing


def test_constrained_params_raise_the_beam_of_a_greedy_request():
    params = DecodeParams(beam_size=1).constrained(((5, 6),))
    assert params.beam_size == constrained_beam(((5, 6),)) and params.constraints == ((5, 6),)


def test_a_document_carries_the_glossary_on_every_segment(served, checkpoint):
    # catches: /translate_file ignoring glossary_id/glossary, or a do-not-translate term translated in a document
    seen = recorded(served.core)
    with front(service_with(served)) as client:
        data = b"The cat sleeps.\n\nMy Firefox and the dog.\n\nA bird sings.\n"
        fields = {"source": "en", "target": "es", "glossary": "cat\tgato negro\nFirefox\tFirefox", "direct": "true"}
        r = client.post("/translate_file", data=fields, files={"file": ("notes.txt", data)})
        assert r.status_code == 200, r.text
        check = client.post("/translate_file", data={**fields, "glossary_id": "nope"}, files={"file": ("a.txt", data)})
        assert check.status_code == 404 and check.json()["error_type"] == "not_found"
    assert b"Firefox" in r.content
    cat = (tuple(checkpoint.tokenizer.encode_target("gato negro")),)
    firefox = (tuple(checkpoint.tokenizer.encode_target("Firefox")),)  # kept as written, inside its sentence
    assert [p.constraints for p in seen if p.constraints] == [cat, firefox]  # the units with "cat" and "Firefox"
    assert all(p.beam_size >= 2 for p in seen if p.constraints)


def test_terms_reach_the_engine_with_their_source_spans(served, checkpoint):
    # catches: constraints sent without the source tokens they translate (placed anywhere), or spans off by the prefix
    seen = recorded(served.core)
    with front(service_with(served)) as client:
        r = client.post("/translate", json={"q": "The cat saw a cat.", "source": "en", "target": "es",
                                            "glossary": {"cat": "gato"}, "parameters": {"beam_size": 1}})  # fmt: skip
        assert r.status_code == 200, r.text
    (params,) = seen
    tok = checkpoint.tokenizer
    ids = tok.encode("The cat saw a cat.")
    assert params.constraints == (tuple(tok.encode_target("gato")),) * 2
    covered = [(tok.source.decode(ids[w:b]), tok.source.decode(ids[a:b])) for w, a, b in params.constraint_spans]
    assert covered == [("The cat", "cat"), ("a cat", "cat")]  # each occurrence, its window from the word before it


def test_glossary_targets_the_model_cannot_take_are_refused_by_name(served, checkpoint):
    # catches: an unwritable or overlong target, or too many terms for the beam, answered 500 or silently dropped
    with front(service_with(served)) as client:
        cases = [({"cat": "gato " * 40}, {"max_new_tokens": 8}, "max_new_tokens=8"),
                 ({f"w{i}": f"p{i}" for i in range(9)}, {}, "max_beam_size")]  # fmt: skip
        unwritable = next((c for c in "\u2603\U0001d11e\ue000" if not checkpoint.tokenizer.spells(c)), None)
        if unwritable is not None:
            cases.append(({"cat": f"gato {unwritable}"}, {}, "glossary['cat']"))
        for glossary, parameters, named in cases:
            text = " ".join(glossary)
            r = client.post("/translate", json={"q": text, "source": "en", "target": "es", "glossary": glossary,
                                                "parameters": parameters})  # fmt: skip
            assert r.status_code == 422 and named in r.json()["error"], r.text
        assert client.post("/translate", json={"q": "cat", "source": "en", "target": "es"}).status_code == 200


def test_the_models_own_word_is_kept_by_the_terms_source_words(checkpoint, monkeypatch):
    # catches: one target's own word cached by the target alone, the first source's served for every other ("bici"
    # for "bike" and for "motorbike" both), or a retry (its term placed by a prefix) given another source's word
    from app.engine import core as engine
    from model.runner.params import ANYWHERE
    from tests.app.inprocess import make_core

    core, asked = make_core(checkpoint.model), []
    monkeypatch.setattr(engine.unfinished, "own_word", lambda runner, src, vocab: asked.append(src) or (len(asked),))
    term, bike, motorbike = (5, 6), [9, 20, 21, 1], [9, 30, 31, 1]  # (the language token, the words, EOS)
    params = DecodeParams().constrained((term,), spans=((1, 1, 3),))
    assert core._own_word(bike, params, 0) == (1,) and core._own_word(motorbike, params, 0) == (2,)
    assert core._own_word([9, 20, 21, 7, 1], params, 0) == (1,)  # the same words in another sentence: kept
    assert asked == [(20, 21, 1), (30, 31, 1)]
    retry = DecodeParams().constrained((term,), spans=(ANYWHERE,))
    assert core._own_word(motorbike, retry, 0) == (2,) and core._own_word([9, 40, 1], retry, 0) == ()
