"""POST /translate against the offline oracle (model.runner.generate.generate): bodies, lists, alternatives, every
decoding parameter, sentence splitting, HTML, timing headers, /languages and /info."""

from __future__ import annotations

import html
import json
from importlib.metadata import version

import pytest

from bench.harness.client import HTTP
from bench.markup import strip, tags_exact
from model.runner.params import DecodeParams
from tests.app.helpers import offline, offline_hyps, ok, translate

TEXTS = ["the cat sleeps", "a big red dog runs in the city", "hello world", "the small green tree eats", "good night"]
DEFAULT_MAX_NEW = 255  # min(default_max_new_tokens=256, max_positions - 1)
SAMPLING = ("temperature", "top_k", "top_p")


def oracle_params(parameters: dict, alternatives: int = 0) -> dict:
    """DecodeParams fields for an HTTP `parameters` object, as the contract defines them."""
    n = alternatives + 1
    fields = set(DecodeParams.__dataclass_fields__)
    out = {k: v for k, v in parameters.items() if k in fields}
    out.update(
        beam_size=max(parameters.get("beam_size", 1), n),
        num_hypotheses=n,
        max_new_tokens=parameters.get("max_new_tokens", DEFAULT_MAX_NEW),
        sampling=any(k in parameters for k in SAMPLING),
    )
    return out


def test_single_text_equals_offline_generate(server, checkpoint):
    """translatedText and details are what model.runner.generate gives for the same ids; timing headers are set."""
    for text in TEXTS:
        r = translate(server.url, text)
        assert r.status_code == 200, r.text
        answer = r.json()
        (hyp,) = offline_hyps(checkpoint, text, max_new_tokens=DEFAULT_MAX_NEW)
        assert answer["translatedText"] == checkpoint.tokenizer.decode(hyp.tokens)
        d = answer["details"]
        assert d["model"] == "en-es"
        assert d["input_tokens"] == len(checkpoint.tokenizer.encode(text))
        assert d["generated_tokens"] == len(hyp.tokens)
        assert d["finish_reason"] == hyp.finish_reason
        assert d["score"] is None  # only with return_scores
        assert 0 <= d["queue_ms"] <= d["total_ms"]
        assert "alternatives" not in answer
        assert int(r.headers["x-generated-tokens"]) == len(hyp.tokens)
        assert float(r.headers["x-queue-time"]) >= 0 and float(r.headers["x-inference-time"]) > 0


def test_list_answers_in_order(server, checkpoint):
    """A list q gives lists back, item i translating q[i]; a string q gives a string."""
    answer = ok(server.url, TEXTS)
    assert answer["translatedText"] == [offline(checkpoint, t, max_new_tokens=DEFAULT_MAX_NEW)[0] for t in TEXTS]
    assert [d["input_tokens"] for d in answer["details"]] == [len(checkpoint.tokenizer.encode(t)) for t in TEXTS]
    reversed_answer = ok(server.url, TEXTS[::-1])
    assert reversed_answer["translatedText"] == answer["translatedText"][::-1]
    assert isinstance(ok(server.url, TEXTS[0])["translatedText"], str)


def test_form_body_equals_json_body(server):
    """x-www-form-urlencoded: q repeated is a list, numbers and booleans are strings, parameters is JSON."""
    params = {"beam_size": 3, "return_scores": True, "max_new_tokens": 40}
    form = {"q": TEXTS[:2], "source": "en", "target": "es", "alternatives": "1", "stream": "false"}
    form["parameters"] = json.dumps(params)
    r = HTTP.post(server.url + "/translate", data=form, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json() == strip_timing(ok(server.url, TEXTS[:2], alternatives=1, parameters=params), r.json())
    single = HTTP.post(server.url + "/translate", data={"q": TEXTS[2], "source": "en", "target": "es"}, timeout=60)
    assert single.status_code == 200, single.text
    assert single.json()["translatedText"] == ok(server.url, TEXTS[2])["translatedText"]


def strip_timing(expected: dict, actual: dict) -> dict:
    """`expected` with the timing fields of `actual` (they differ between two runs)."""
    out = json.loads(json.dumps(expected))
    details = out["details"] if isinstance(out["details"], list) else [out["details"]]
    theirs = actual["details"] if isinstance(actual["details"], list) else [actual["details"]]
    for mine, other in zip(details, theirs, strict=True):
        mine["queue_ms"], mine["total_ms"] = other["queue_ms"], other["total_ms"]
    return out


def test_alternatives_are_the_n_best(server, checkpoint):
    """alternatives=k returns beams 2..k+1 of the n-best list, distinct from each other and the best."""
    texts = TEXTS[:2]
    answer = ok(server.url, texts, alternatives=2, parameters={"beam_size": 4, "max_new_tokens": 60})
    for i, text in enumerate(texts):
        nbest = offline(checkpoint, text, beam_size=4, num_hypotheses=3, max_new_tokens=60)
        assert len(set(nbest)) == 3  # the oracle has three distinct hypotheses here
        assert answer["translatedText"][i] == nbest[0]
        assert answer["alternatives"][i] == nbest[1:]
    single = ok(server.url, texts[0], alternatives=1, parameters={"max_new_tokens": 60})  # beam widened to 2
    assert single["alternatives"] == offline(checkpoint, texts[0], beam_size=2, num_hypotheses=2, max_new_tokens=60)[1:]


CASES = [  # (parameter under test, parameters): the answer must equal the oracle and differ without the parameter
    ("beam_size", {"beam_size": 4}),
    ("max_new_tokens", {"max_new_tokens": 3}),
    ("min_new_tokens", {"min_new_tokens": 20}),
    ("length_penalty", {"beam_size": 4, "length_penalty": -1.0}),
    ("repetition_penalty", {"repetition_penalty": 3.0}),
    ("no_repeat_ngram_size", {"no_repeat_ngram_size": 2}),
    ("temperature", {"temperature": 1.5, "seed": 1}),
    ("top_k", {"top_k": 5, "seed": 1}),
    ("top_p", {"top_p": 0.5, "seed": 1}),
]


@pytest.mark.parametrize(("name", "params"), CASES, ids=[c[0] for c in CASES])
def test_decoding_parameter_has_its_effect(server, checkpoint, name, params):
    """Each parameter reaches the decoder: answers equal the oracle with it, which differs from without it."""
    answer = ok(server.url, TEXTS, parameters=params)
    with_it = [offline_hyps(checkpoint, t, **oracle_params(params))[0] for t in TEXTS]
    baseline = {k: v for k, v in params.items() if k != name}
    without = [offline(checkpoint, t, **oracle_params(baseline))[0] for t in TEXTS]
    texts = [checkpoint.tokenizer.decode(h.tokens) for h in with_it]
    assert answer["translatedText"] == texts
    assert [d["generated_tokens"] for d in answer["details"]] == [len(h.tokens) for h in with_it]
    assert [d["finish_reason"] for d in answer["details"]] == [h.finish_reason for h in with_it]
    assert texts != without, f"{name} changed nothing in the oracle: pick other values"
    if name == "max_new_tokens":
        assert all(d["generated_tokens"] <= 3 for d in answer["details"])
        assert "length" in {d["finish_reason"] for d in answer["details"]}
    if name == "min_new_tokens":
        assert all(d["generated_tokens"] >= 20 for d in answer["details"])
    if name == "no_repeat_ngram_size":
        for h in with_it:
            bigrams = list(zip(h.tokens, h.tokens[1:], strict=False))
            assert len(bigrams) == len(set(bigrams))


def test_seed_makes_sampling_reproducible(server):
    """Same seed -> same text (also inside a batch); different seeds -> different samples."""
    params = {"temperature": 1.2, "top_k": 50}
    runs = {seed: ok(server.url, TEXTS, parameters={**params, "seed": seed})["translatedText"] for seed in (1, 2, 3)}
    assert ok(server.url, TEXTS, parameters={**params, "seed": 2})["translatedText"] == runs[2]
    assert ok(server.url, TEXTS[1], parameters={**params, "seed": 2})["translatedText"] == runs[2][1]
    assert len({tuple(v) for v in runs.values()}) == 3


def test_return_scores(server, checkpoint):
    """return_scores: details.score is the best hypothesis' length-normalised log-probability."""
    for params in ({}, {"beam_size": 3}):
        answer = ok(server.url, TEXTS[:3], parameters={**params, "return_scores": True})
        for text, d in zip(TEXTS[:3], answer["details"], strict=True):
            (best, *_) = offline_hyps(checkpoint, text, **oracle_params(params))
            assert d["score"] == pytest.approx(best.score, abs=1e-4)
            assert d["score"] < 0
    assert ok(server.url, TEXTS[0], parameters={"return_scores": False})["details"]["score"] is None


def test_split_sentences_by_default(server, checkpoint):
    """Sentences by default (as DeepL's split_sentences=1, and LibreTranslate): each sentence translated alone and
    joined with the original separators; split_sentences=false translates the text as one unit. Catches the default
    turned back to one unit per text."""
    text = "The cat sleeps. The dog runs!  A big tree?\nGood night."
    sentences, seps = ["The cat sleeps.", "The dog runs!", "A big tree?", "Good night."], [" ", "  ", "\n", ""]
    expected = "".join(
        offline(checkpoint, s, max_new_tokens=DEFAULT_MAX_NEW)[0] + sep for s, sep in zip(sentences, seps, strict=True)
    )
    for answer in (ok(server.url, text), ok(server.url, text, parameters={"split_sentences": True})):
        assert answer["translatedText"] == expected
        assert answer["details"]["input_tokens"] == sum(len(checkpoint.tokenizer.encode(s)) for s in sentences)
    whole = ok(server.url, text, parameters={"split_sentences": False})["translatedText"]
    assert whole == offline(checkpoint, text, max_new_tokens=DEFAULT_MAX_NEW)[0] != expected


def test_split_sentences_lifts_the_input_limit(server, checkpoint):
    """A text over max_input_tokens is refused whole (422 naming the limit and how to cut it) but fine split into
    sentences, as by default."""
    sentence = "The big red dog runs in the green city at night."
    text = " ".join([sentence] * 40)
    assert len(checkpoint.tokenizer.encode(text)) > 256
    r = translate(server.url, text, parameters={"split_sentences": False})
    assert r.status_code == 422 and "max_input_tokens=256" in r.json()["error"]
    assert "split_sentences" in r.json()["error"]
    answer = ok(server.url, text, parameters={"max_new_tokens": 8})
    one = offline(checkpoint, sentence, max_new_tokens=8)[0]
    assert answer["translatedText"] == " ".join([one] * 40)


def test_html_keeps_markup(server, checkpoint):
    """format=html: tags, attributes, comments, script and code stay byte for byte; text nodes are translated."""

    def t(text: str) -> str:
        return html.escape(offline(checkpoint, text, max_new_tokens=DEFAULT_MAX_NEW)[0], quote=False)

    markup = (
        '<P CLASS="intro" data-x=\'the cat\'>The cat sleeps <b title="a big dog">in the house</b></P >\n'
        '<script>var s = "the dog <b>runs</b>";</script><code>the dog &lt; runs &amp; eats</code>'
        "<!-- hello world --><br/><img alt='green tree' src=x.png>"
    )
    tail = (
        '<script>var s = "the dog <b>runs</b>";</script><code>the dog &lt; runs &amp; eats</code>'
        "<!-- hello world --><br/><img alt='green tree' src=x.png>"
    )
    answer = ok(server.url, markup, format="html")
    head, sentence = '<P CLASS="intro" data-x=\'the cat\'>', "The cat sleeps in the house"  # <b> inline: one unit
    got = answer["translatedText"]
    assert got.startswith(head) and got.endswith("</P >\n" + tail)
    inside = got[len(head) : -len("</P >\n" + tail)]
    assert tags_exact('<b title="a big dog"></b>', inside)  # placed by alignment (tests.app.test_markup)
    assert strip(inside) == " ".join(t(sentence).split())
    assert answer["details"]["input_tokens"] == len(checkpoint.tokenizer.encode(sentence))
    plain = ok(server.url, "<b>the cat</b>")["translatedText"]  # format text: markup is just text
    assert plain == offline(checkpoint, "<b>the cat</b>", max_new_tokens=DEFAULT_MAX_NEW)[0]


def test_html_entities_in_text_are_decoded_and_reescaped(server, checkpoint):
    """Text nodes reach the model unescaped; the translation is escaped back."""
    answer = ok(server.url, "<p>the cat &amp; the dog</p>", format="html")
    translated = offline(checkpoint, "the cat & the dog", max_new_tokens=DEFAULT_MAX_NEW)[0]
    assert answer["translatedText"] == f"<p>{html.escape(translated, quote=False)}</p>"


def test_html_without_text_comes_back_unchanged(server):
    """Markup with no text node: nothing to translate, the markup itself, zero tokens (not a 500)."""
    for markup in ("<br>", "<p> </p><!-- x -->"):
        r = translate(server.url, markup, format="html", parameters={"return_scores": True})
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"] == markup
        assert r.json()["details"]["generated_tokens"] == 0
        assert r.headers["x-generated-tokens"] == "0"


def test_timing_headers_cover_the_whole_request(server):
    """x-generated-tokens sums the items; times are milliseconds."""
    r = translate(server.url, TEXTS, parameters={"max_new_tokens": 30})
    answer = r.json()
    assert int(r.headers["x-generated-tokens"]) == sum(d["generated_tokens"] for d in answer["details"])
    inference = float(r.headers["x-inference-time"])
    assert 0 < inference <= max(d["total_ms"] for d in answer["details"]) + 1


def test_languages(server):
    """GET /languages from the loaded models: every source and target, as LibreTranslate lists them."""
    r = HTTP.get(server.url + "/languages")
    assert r.status_code == 200
    assert r.json() == [
        {"code": "en", "name": "English", "targets": ["es"]},
        {"code": "es", "name": "Spanish", "targets": []},
    ]


def test_info(server, checkpoint):
    """GET /info: models (name, pair, parameters, dtype, device), limits (flags applied), version."""
    info = HTTP.get(server.url + "/info").json()
    assert info["version"] == version("mt-server")
    assert info["ready"] is True
    (m,) = info["models"]
    assert (m["name"], m["source"], m["target"]) == ("en-es", "en", "es")
    assert m["parameters"] == sum(p.numel() for p in checkpoint.model.parameters())
    assert (m["dtype"], m["device"]) == ("float32", "cpu")
    limits = info["limits"]
    assert limits["max_batch_size"] == 8  # from --max-batch-size
    positions = min(512, checkpoint.model.cfg.max_positions)  # a source slot per request, target positions per row
    assert (m["batch"]["max_rows"], m["batch"]["max_tokens"]) == (8, 8 * 256 + 8 * positions)
    assert m["batch"]["reason"].startswith(
        f"rows as set; tokens: 8 sources x 256 (max_input_tokens) + 8 rows x {positions}"
    )
    assert limits["max_input_tokens"] == 256 and limits["max_items"] == 64 and limits["max_body_bytes"] == 1_000_000


def test_source_auto(server, checkpoint):
    """source=auto picks the only model that translates into the target."""
    r = HTTP.post(server.url + "/translate", json={"q": TEXTS[0], "target": "es"}, timeout=60)
    assert r.status_code == 200
    assert r.json()["translatedText"] == offline(checkpoint, TEXTS[0], max_new_tokens=DEFAULT_MAX_NEW)[0]


def test_api_key_is_ignored_without_configured_keys(server):
    """api_key is accepted (LibreTranslate clients send it) and not checked when no keys are configured."""
    assert ok(server.url, TEXTS[0], api_key="anything")["translatedText"] == ok(server.url, TEXTS[0])["translatedText"]
