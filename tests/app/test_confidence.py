"""details.confidence through the HTTP edge, against the built-in model and its shipped calibration: in [0, 1], the same
for a text alone as in a list and streamed as not (catches a confidence taken from another unit, or computed only on
one path), per sentence when a text is split (its mean weighted by source tokens), marked at the request's threshold
(catches a threshold that is ignored), counted per model in /metrics, absent from the DeepL dialect; a threshold
outside [0, 1] is a 422 naming it, and a calibration file that does not parse stops the server at start-up naming the
setting."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.harness.client import HTTP, metrics, parse_sse

TEXTS = ["Good morning.", "Where is the station?", "The xylophonist recalibrated the flux capacitor quickly."]
SPLIT = "Good morning. The house is big. Where is the station?"


def translate(url: str, q, **extra) -> dict:
    body = {"q": q, "source": "en", "target": "es", **extra}
    r = HTTP.post(url + "/translate", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_confidence_is_in_0_1_and_a_text_has_the_same_alone_as_in_a_list(builtin):
    together = translate(builtin.url, TEXTS)["details"]
    for text, details in zip(TEXTS, together, strict=True):
        assert 0 <= details["confidence"] <= 1
        assert translate(builtin.url, text)["details"]["confidence"] == details["confidence"]


def test_a_glossary_term_is_the_users_word_not_a_doubt_of_the_model(builtin):
    # catches: the forced term's log-probability rating a right sentence 0.0 ("La vivienda es grande.", every glossary
    # output marked for review)
    plain = translate(builtin.url, "The house is big.")
    termed = translate(builtin.url, "The house is big.", glossary={"house": "vivienda"})
    assert termed["translatedText"] == "La vivienda es grande." and not termed["details"]["low_confidence"]
    assert abs(termed["details"]["confidence"] - plain["details"]["confidence"]) < 0.1, (termed, plain)


def test_a_split_text_has_each_sentence_and_their_weighted_mean(builtin):
    details = translate(builtin.url, SPLIT)["details"]
    sentences = details["sentences"]
    assert len(sentences) == 3 and all(0 <= s["confidence"] <= 1 for s in sentences)
    alone = [translate(builtin.url, t)["details"]["confidence"] for t in ("Good morning.", "The house is big.")]
    assert [s["confidence"] for s in sentences[:2]] == pytest.approx(alone, abs=1e-4)
    low, high = min(s["confidence"] for s in sentences), max(s["confidence"] for s in sentences)
    assert low <= details["confidence"] <= high
    one = translate(builtin.url, "Good morning.")["details"]
    assert "sentences" not in one or one["sentences"] is None


def test_streamed_done_event_has_the_same_confidence(builtin):
    body = {"q": [SPLIT, TEXTS[2]], "source": "en", "target": "es", "stream": True}
    r = HTTP.post(builtin.url + "/translate", json=body, timeout=60)
    done = [e.data for e in parse_sse(r.text) if e.event == "done"]
    assert len(done) == 1
    plain = translate(builtin.url, [SPLIT, TEXTS[2]])
    strip = lambda d: {k: d.get(k) for k in ("confidence", "sentences", "low_confidence")}  # noqa: E731
    assert [strip(d) for d in done[0]["details"]] == [strip(d) for d in plain["details"]]


def test_the_threshold_marks_low_sentences_and_counts_them(builtin):
    key = ("mt_low_confidence_sentences_total", frozenset({("model", "en-es")}))
    total = ("mt_confidence_sentences_total", frozenset({("model", "en-es")}))
    before = metrics(builtin.url)
    none = translate(builtin.url, SPLIT, parameters={"confidence_threshold": 0.0})["details"]
    every = translate(builtin.url, SPLIT, parameters={"confidence_threshold": 1.0})["details"]
    assert none["low_confidence"] is False and not any(s["low"] for s in none["sentences"])
    assert every["low_confidence"] is True and all(s["low"] for s in every["sentences"])
    after = metrics(builtin.url)
    assert after[key] - before.get(key, 0) == 3 and after[total] - before.get(total, 0) == 6


@pytest.mark.parametrize("bad", [1.5, -0.1, "high"])
def test_a_threshold_outside_0_1_is_a_422_naming_it(builtin, bad):
    body = {"q": "Hello", "source": "en", "target": "es", "parameters": {"confidence_threshold": bad}}
    r = HTTP.post(builtin.url + "/translate", json=body, timeout=30)
    assert r.status_code == 422 and "confidence_threshold" in r.json()["error"], r.text


def test_the_deepl_dialect_keeps_deepls_shape(builtin):
    r = HTTP.post(builtin.url + "/v2/translate", json={"text": ["Good morning."], "target_lang": "ES"}, timeout=30)
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"translations"} and set(r.json()["translations"][0]) <= {
        "detected_source_language", "text", "billed_characters", "model_type_used"
    }  # fmt: skip


def test_a_broken_calibration_file_stops_the_server_naming_the_setting(tmp_path):
    bad = tmp_path / "calibration.json"
    bad.write_text('{"format": "mt-confidence/1", "acceptable": 40, "one_row": {}}')
    run = subprocess.run([sys.executable, "-m", "app", "--confidence-file", str(bad)], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert run.returncode == 2 and "confidence_file" in run.stderr and "one_row" in run.stderr, run.stderr
