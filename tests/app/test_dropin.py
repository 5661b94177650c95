"""A drop-in for OPUS-MT, multi-target OPUS-MT, NLLB-200 and LibreTranslate clients: one real server with three
tiny checkpoints, answers compared with `transformers` on the same weights, and with libretranslatepy."""

from __future__ import annotations

import re

import pytest

from bench.harness.client import HTTP
from bench.harness.server import ServerProcess

transformers = pytest.importorskip("transformers")

TEXTS = ["the cat runs", "a big red house near the river", "hello world", "the small dog eats", "good night city"]
OPUS_DEFAULTS = {"num_beams": 4, "max_length": 8, "forced_eos_token_id": 0, "bad_words_ids": "pad"}
NLLB = {"en": "eng_Latn", "es": "spa_Latn", "fr": "fra_Latn", "de": "deu_Latn"}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """An OPUS-MT en-es with OPUS-MT's generation defaults, a multi-target OPUS-MT, a tiny NLLB."""
    from bench.harness.fixtures import make_m2m100, make_marian

    root = tmp_path_factory.mktemp("dropin")
    return {
        "opus": make_marian(root / "opus-mt-en-es", seed=1, generation=OPUS_DEFAULTS),
        "multi": make_marian(root / "opus-mt-en-ROMANCE", seed=2, targets=("fr", "it", "por")),
        "nllb": make_m2m100(root / "nllb-200-tiny", seed=3),
    }


@pytest.fixture(scope="module")
def server(dirs):
    args = [a for key in ("opus", "multi", "nllb") for a in ("--model", str(dirs[key]))]
    proc = ServerProcess(*args, "--warmup-rounds", "0", "--device", "cpu", "--dtype", "float32").wait()
    yield proc
    proc.stop()


def post(url: str, path: str = "/translate", **body) -> dict:
    """POST a JSON body and insist on 200."""
    r = HTTP.post(url + path, json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def hf_generate(path, text: str, src_lang: str | None = None, **kwargs) -> str:
    """transformers' generate on the checkpoint with its own defaults (and `kwargs`), decoded; pad is never generated
    (the server bans it, as OPUS-MT's bad_words_ids do)."""
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(path).eval()
    tok = transformers.AutoTokenizer.from_pretrained(path)
    if src_lang:
        tok.src_lang = src_lang
    kwargs.setdefault("bad_words_ids", [[model.config.pad_token_id]])
    out = model.generate(**tok([text], return_tensors="pt"), **kwargs)
    return tok.decode(out[0], skip_special_tokens=True)


def test_default_request_equals_transformers_with_the_checkpoint_defaults(server, dirs):
    """No parameters: beam 4, max_length 8, EOS forced at the limit, pad banned, as OPUS-MT's config says."""
    reasons = []
    for text in TEXTS:
        answer = post(server.url, q=text, source="en", target="es")
        assert answer["translatedText"] == hf_generate(dirs["opus"], text)
        reasons.append(answer["details"]["finish_reason"])
    assert "length" in reasons  # the forced EOS at the limit was exercised


def test_info_shows_generation_defaults_and_languages(server):
    models = {m["name"]: m for m in HTTP.get(server.url + "/info").json()["models"]}
    gen = models["en-es"]["generation"]
    assert (gen["beam_size"], gen["max_new_tokens"], gen["forced_eos"]) == (4, 7, True)
    assert models["opus-mt-en-ROMANCE"]["languages"] == {"sources": ["en"], "targets": ["fr", "it", "pt"]}
    assert models["nllb-200-tiny"]["kind"] == "m2m_100"
    assert models["nllb-200-tiny"]["languages"]["targets"] == ["en", "es", "fr", "de", "zh", "zt"]


def test_languages_lists_every_pair(server):
    listing = {item["code"]: item for item in HTTP.get(server.url + "/languages").json()}
    assert listing["en"]["targets"] == ["de", "es", "fr", "it", "pt", "zh", "zt"]
    assert listing["es"]["targets"] == ["de", "en", "fr", "zh", "zt"]
    assert (listing["zt"]["name"], listing["de"]["name"]) == ("Chinese (Traditional)", "German")


@pytest.mark.parametrize("target", ["fr", "pt"])
def test_multi_target_opus_mt_prepends_the_target_token(server, dirs, target):
    """en -> fr/pt on opus-mt-en-ROMANCE is transformers' output for ">>fr<< text" (>>por<< for pt)."""
    token = {"fr": ">>fr<<", "pt": ">>por<<"}[target]
    for text in TEXTS[:3]:
        answer = post(server.url, q=text, source="en", target=target, parameters={"max_new_tokens": 10})
        assert answer["details"]["model"] == "opus-mt-en-ROMANCE"
        ref = hf_generate(dirs["multi"], f"{token} {text}", max_new_tokens=10, num_beams=1)
        assert answer["translatedText"] == ref


@pytest.mark.parametrize("beams", [1, 4])
def test_nllb_translation_equals_transformers(server, dirs, beams):
    """es -> fr and es -> de on the tiny NLLB: the target-language token forced first, as transformers does."""
    tok = transformers.AutoTokenizer.from_pretrained(dirs["nllb"])
    for target in ("fr", "de"):
        forced = tok.convert_tokens_to_ids(NLLB[target])
        for text in TEXTS[:3]:
            params = {"beam_size": beams, "max_new_tokens": 12}
            answer = post(server.url, q=text, source="es", target=target, parameters=params)
            kwargs = {"forced_bos_token_id": forced, "num_beams": beams, "max_new_tokens": 12}
            ref = hf_generate(dirs["nllb"], text, "spa_Latn", **kwargs)
            assert answer["translatedText"] == ref


def test_auto_detects_routes_and_answers_detected_language(server):
    """Spanish text, source auto, target fr: detected among the sources that translate into fr, routed to NLLB."""
    spanish = "el gato duerme en la casa grande cerca del río"
    answer = post(server.url, q=spanish, source="auto", target="fr", parameters={"max_new_tokens": 8})
    assert answer["detectedLanguage"]["language"] == "es" and 50 < answer["detectedLanguage"]["confidence"] <= 100
    explicit = post(server.url, q=spanish, source="es", target="fr", parameters={"max_new_tokens": 8})
    assert answer["translatedText"] == explicit["translatedText"]
    listed = post(server.url, q=["the cat runs in the city", "good night"], source="auto", target="es")
    assert [d["language"] for d in listed["detectedLanguage"]] == ["en", "en"]


def test_detect_answers_the_language_of_the_text(server):
    """LibreTranslate's /detect: candidates best first with confidence in percent, among the served sources, or among
    every language the detector knows with `all_languages` (served or not: Galician is not, Portuguese only as a
    target); form too."""
    best = post(server.url, "/detect", q="Bonjour, je voudrais un café s'il vous plaît")
    assert best[0]["language"] == "fr" and best == sorted(best, key=lambda d: -d["confidence"])
    sources = {x["code"] for x in HTTP.get(server.url + "/languages").json() if x["targets"]}
    assert {d["language"] for d in best} <= sources
    portuguese = "Onde fica a estação de comboios?"
    assert post(server.url, "/detect", q=portuguese)[0]["language"] != "pt"
    assert post(server.url, "/detect", q=portuguese, all_languages=True)[0]["language"] == "pt"
    galician = post(server.url, "/detect", q="Onte fomos á praia cos nenos e comemos xuntos na casa da avoa.",
                    all_languages=True)  # fmt: skip
    assert galician[0]["language"] == "gl" and "gl" not in {
        x["code"] for x in HTTP.get(server.url + "/languages").json()
    }
    form = HTTP.post(server.url + "/detect", data={"q": "Guten Morgen, wie geht es dir?"}).json()
    assert form[0]["language"] == "de"
    both = post(server.url, "/detect", q=["hello my friend, how are you today?", "hola amigo mío, ¿cómo estás hoy?"])
    assert [d[0]["language"] for d in both] == ["en", "es"]


def test_libretranslatepy_client(server):
    """The LibreTranslate Python client: translate, languages and detect against this server."""
    from libretranslatepy import LibreTranslateAPI

    lt = LibreTranslateAPI(server.url + "/")
    assert (
        lt.translate("the cat runs", "en", "es")
        == post(server.url, q="the cat runs", source="en", target="es")["translatedText"]
    )
    assert {"code": "de", "name": "German"}.items() <= next(x for x in lt.languages() if x["code"] == "de").items()
    assert lt.detect("¿Dónde está la estación de tren?")[0]["language"] == "es"
    assert lt.translate("Hola mundo", "auto", "en") == lt.translate("Hola mundo", "es", "en")  # NLLB's es->en


@pytest.mark.parametrize("ctype", ["text/plain", "application/xml"])
@pytest.mark.parametrize("path", ["/translate", "/detect"])
def test_other_content_types_get_415(server, ctype, path):
    body = b'{"q": "x", "source": "en", "target": "es"}'
    r = HTTP.post(server.url + path, content=body, headers={"content-type": ctype})
    assert r.status_code == 415 and r.json()["error_type"] == "unsupported_media_type"
    assert ctype in r.json()["error"] and "application/json" in r.json()["error"]


def test_swagger_ui_is_served_from_the_package(server):
    """/docs loads nothing from elsewhere: every script and stylesheet it names answers here."""
    page = HTTP.get(server.url + "/docs").text
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css))"', page)
    assert assets and not re.search(r"https?://", page)
    for asset in assets:
        assert HTTP.get(server.url + asset).status_code == 200


def test_a_model_that_cannot_load_stops_the_process(tmp_path):
    """Exit status 1 with the reason on the last line, instead of serving 503 forever."""
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    proc = ServerProcess("--model", str(tmp_path), "--warmup-rounds", "0")
    try:
        assert proc.proc.wait(60) == 1
    finally:
        proc.stop()
    last = proc.log_tail(1)
    assert last.startswith("error: model loading failed:") and "model_type 'bert'" in last
