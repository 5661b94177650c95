"""The contract's error table: status, JSON body {"error", "error_type"}, a message naming the field and the limit."""

from __future__ import annotations

import httpx
import pytest

from bench.harness.client import HTTP
from bench.harness.server import ServerProcess, add_keys
from tests.app.helpers import body, ok, translate

LONG_TEXT = " ".join(["the big red dog runs in the green city at night"] * 40)  # > 256 tokens
OK_BODY = body("the cat sleeps")


def check_error(r: httpx.Response, status: int, error_type: str, *names: str) -> str:
    """The response is the contract's error: status, exactly error + error_type, message naming `names`."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    err = r.json()
    assert set(err) == {"error", "error_type"}
    assert err["error_type"] == error_type
    for name in names:
        assert name in err["error"], f"{name!r} not in {err['error']!r}"
    return err["error"]


@pytest.mark.parametrize(
    ("payload", "names"),
    [
        ({"q": "x", "source": "en", "target": "de"}, ["de is not supported as a target"]),
        ({"q": "x", "source": "fr", "target": "es"}, ["fr is not supported as a source"]),
        ({"q": "x", "source": "auto", "target": "zz"}, ["zz is not supported as a target"]),
        ({"q": "x", "source": "fr", "target": "en"}, ["en is not supported as a target, nor fr as a source"]),
        ({"q": "x", "source": "es", "target": "en"}, ["en is not supported as a target, nor es as a source"]),
    ],
    ids=["unknown-target", "unknown-source", "auto-unknown-target", "both-sides", "reverse-pair"],
)
def test_unsupported_language(server, payload, names):
    """400 unsupported_language starts with LibreTranslate's words ("xx is not supported"), then names the side and
    the pairs served. Catches a message that says neither (the issue's Spanish text with target "en")."""
    r = HTTP.post(server.url + "/translate", json=payload)
    message = check_error(r, 400, "unsupported_language", *names[:1], "served pairs: en-es")
    assert message.startswith(names[0].split(" as ")[0])


def P(**params) -> dict:  # noqa: N802 (reads as a literal)
    """A body with decoding parameters."""
    return body("the cat sleeps", parameters=params)


VALIDATION = [  # (id, json body, words the message must contain)
    ("blank-q", body("  \n "), ["q"]),
    ("empty-item", body(["the cat", ""]), ["q[1]"]),
    ("non-string-item", body(["the cat", 3]), ["q"]),
    ("too-many-items", body(["x"] * 65), ["q", "max_items=64"]),
    ("too-many-tokens", body(LONG_TEXT), ["q[0]", "max_input_tokens=256", "split_sentences"]),
    ("too-many-tokens-in-list", body(["the cat", LONG_TEXT]), ["q[1]", "max_input_tokens=256"]),
    ("bad-format", body("x", format="pdf"), ["format"]),
    ("alternatives-type", body("x", alternatives="many"), ["alternatives"]),
    ("alternatives-negative", body("x", alternatives=-1), ["alternatives", "0"]),
    ("alternatives-over-beams", body("x", alternatives=8), ["alternatives", "max_beam_size=8"]),
    ("parameters-type", body("x", parameters=[1]), ["parameters"]),
    ("unknown-parameter", P(bogus=1), ["parameters.bogus"]),
    ("beam-type", P(beam_size="wide"), ["parameters.beam_size"]),
    ("beam-zero", P(beam_size=0), ["parameters.beam_size", "1"]),
    ("beam-over-limit", P(beam_size=9), ["parameters.beam_size", "max_beam_size=8"]),
    ("max-new-zero", P(max_new_tokens=0), ["parameters.max_new_tokens", "1"]),
    ("max-new-over-limit", P(max_new_tokens=1000), ["parameters.max_new_tokens", "255"]),
    ("min-new-negative", P(min_new_tokens=-1), ["parameters.min_new_tokens"]),
    ("min-over-max", P(min_new_tokens=50, max_new_tokens=10), ["parameters.min_new_tokens", "max_new_tokens=10"]),
    ("length-penalty-range", P(length_penalty=50), ["parameters.length_penalty", "10"]),
    ("repetition-penalty-zero", P(repetition_penalty=0), ["parameters.repetition_penalty", "0.01"]),
    ("repetition-penalty-tiny", P(repetition_penalty=1e-300), ["parameters.repetition_penalty"]),
    ("no-repeat-range", P(no_repeat_ngram_size=17), ["parameters.no_repeat_ngram_size", "16"]),
    ("temperature-zero", P(temperature=0), ["parameters.temperature", "0.01"]),
    ("temperature-tiny", P(temperature=1e-300), ["parameters.temperature"]),
    ("temperature-type", P(temperature="hot"), ["parameters.temperature"]),
    ("top-k-negative", P(top_k=-1), ["parameters.top_k"]),
    ("top-p-range", P(top_p=1.5), ["parameters.top_p", "1"]),
    ("top-p-zero", P(top_p=0), ["parameters.top_p", "0"]),
    ("seed-negative", P(seed=-1), ["parameters.seed"]),
    ("return-scores-type", P(return_scores="sometimes"), ["parameters.return_scores"]),
    ("sampling-with-beams", P(temperature=0.7, beam_size=2), ["sampling", "beam_size"]),
    ("sampling-with-alternatives", body("x", alternatives=1, parameters={"top_k": 5}), ["sampling", "alternatives"]),
]


@pytest.mark.parametrize(("payload", "names"), [v[1:] for v in VALIDATION], ids=[v[0] for v in VALIDATION])
def test_validation(server, payload, names):
    """422 validation naming the field (and the limit)."""
    r = HTTP.post(server.url + "/translate", json=payload, timeout=30)
    check_error(r, 422, "validation", *names)


@pytest.mark.parametrize(
    ("content", "ctype", "names"),
    [
        (b'{"q": "x", "source": ', "application/json", ["body", "JSON"]),
        (b"[1, 2]", "application/json", ["body", "object"]),
        (b"\xff\xfe", "application/json", ["body"]),
        (
            b"q=x&source=en&target=es&parameters=%7Bnot+json",
            "application/x-www-form-urlencoded",
            ["parameters", "JSON"],
        ),
        (b"q=x&source=en&target=es&alternatives=two", "application/x-www-form-urlencoded", ["alternatives"]),
    ],
    ids=[
        "truncated-json",
        "json-array",
        "not-utf8",
        "form-bad-parameters",
        "form-bad-number",
    ],
)
def test_malformed_bodies(server, content, ctype, names):
    """Malformed JSON or form bodies: 422 naming the body or the field."""
    r = HTTP.post(server.url + "/translate", content=content, headers={"content-type": ctype})
    check_error(r, 422, "validation", *names)


@pytest.mark.parametrize(
    ("content", "ctype", "name"),
    [
        (b'{"source": "en", "target": "es"}', "application/json", "q"),
        (b'{"q": "x", "source": "en"}', "application/json", "target"),
        (b'{"q": "", "source": "en", "target": "es"}', "application/json", "q"),
        (b'{"q": [], "source": "en", "target": "es"}', "application/json", "q"),
        (b"", "application/json", "q"),
        (b"q=x&source=en", "application/x-www-form-urlencoded", "target"),
    ],
    ids=["missing-q", "missing-target", "empty-q", "empty-list", "empty-body", "form-missing-target"],
)
def test_missing_fields(server, content, ctype, name):
    """A missing or empty `q` or `target`: 400 in LibreTranslate's words (tests/app/test_libretranslate_conformance)."""
    r = HTTP.post(server.url + "/translate", content=content, headers={"content-type": ctype})
    assert check_error(r, 400, "validation", name) == f"Invalid request: missing {name} parameter"


def test_unknown_routes_are_json(server):
    """404 and 405 answer in the same JSON shape."""
    check_error(HTTP.get(server.url + "/nope"), 404, "not_found")
    check_error(HTTP.get(server.url + "/translate"), 405, "method_not_allowed")


def test_server_still_serves_after_errors(server):
    """All the refusals above left the server healthy."""
    assert HTTP.get(server.url + "/health/ready").status_code == 200
    assert ok(server.url, "the cat sleeps")["translatedText"]


@pytest.fixture(scope="module")
def guarded(native_dir, tmp_path_factory):
    """A server with API keys and two models from comma-separated env lists, a small body limit, 3 items."""
    db = add_keys(tmp_path_factory.mktemp("keys") / "keys.sqlite", {"key-one": {}, "key-two": {}})
    env = {
        "MT_API_KEYS": "true",
        "MT_KEYS_DB": str(db),
        "MT_MODELS": f"en-es={native_dir},en-fr={native_dir}",
        "MT_MAX_ITEMS": "3",
    }
    proc = ServerProcess("--max-body-bytes", "2048", "--warmup-rounds", "0", env=env).wait()
    yield proc
    proc.stop()


def test_api_keys(guarded):
    """With MT_API_KEYS=true: 403 without or with a wrong key; either stored key works (JSON, form, a file)."""
    check_error(HTTP.post(guarded.url + "/translate", json=OK_BODY), 403, "forbidden", "api_key", "required")
    check_error(HTTP.post(guarded.url + "/translate", json={**OK_BODY, "api_key": "key"}), 403, "forbidden", "invalid")
    for key in ("key-one", "key-two"):
        assert HTTP.post(guarded.url + "/translate", json={**OK_BODY, "api_key": key}, timeout=30).status_code == 200
    form = {"q": "the cat", "source": "en", "target": "es", "api_key": "key-two"}
    assert HTTP.post(guarded.url + "/translate", data=form, timeout=30).status_code == 200
    upload = {"file": ("a.txt", b"the cat\n")}
    fields = {"source": "en", "target": "es"}
    r = HTTP.post(guarded.url + "/translate_file", files=upload, data=fields, timeout=30)
    check_error(r, 403, "forbidden", "api_key", "required")
    r = HTTP.post(guarded.url + "/translate_file", files=upload, data={**fields, "api_key": "key"}, timeout=30)
    check_error(r, 403, "forbidden", "invalid")
    r = HTTP.post(guarded.url + "/translate_file", files=upload, data={**fields, "api_key": "key-one"}, timeout=30)
    assert r.status_code == 200, r.text


def test_models_from_env_list(guarded):
    """MT_MODELS as a comma-separated list: both pairs served, routed, listed; auto picks by target."""
    assert HTTP.get(guarded.url + "/languages").json() == [
        {"code": "en", "name": "English", "targets": ["es", "fr"]},
        {"code": "es", "name": "Spanish", "targets": []},
        {"code": "fr", "name": "French", "targets": []},
    ]
    assert [m["name"] for m in HTTP.get(guarded.url + "/info").json()["models"]] == ["en-es", "en-fr"]
    for target in ("es", "fr"):
        r = HTTP.post(
            guarded.url + "/translate", json={**OK_BODY, "source": "auto", "target": target, "api_key": "key-one"}
        )
        assert r.status_code == 200 and r.json()["details"]["model"] == f"en-{target}"
    r = HTTP.post(guarded.url + "/translate", json={**OK_BODY, "source": "es", "target": "fr", "api_key": "key-one"})
    message = check_error(r, 400, "unsupported_language", "served pairs: en-es, en-fr")
    assert message.startswith("es is not supported as a source")  # a target, but no model's source


def test_max_items_from_env(guarded):
    """MT_MAX_ITEMS=3 is the limit the message names."""
    r = HTTP.post(guarded.url + "/translate", json=body(["a", "b", "c", "d"], api_key="key-one"))
    check_error(r, 422, "validation", "q", "max_items=3")


def chunks(data: bytes, size: int = 512):
    """A body without Content-Length (httpx sends it chunked)."""
    for i in range(0, len(data), size):
        yield data[i : i + size]


def test_payload_too_large(guarded):
    """413 over --max-body-bytes, by Content-Length or while a chunked body streams in; small chunked is fine."""
    big = body("the cat " * 400, api_key="key-one")
    check_error(HTTP.post(guarded.url + "/translate", json=big), 413, "payload_too_large", "max_body_bytes=2048")
    raw = httpx.Request("POST", "http://x", json=big).content
    r = HTTP.post(guarded.url + "/translate", content=chunks(raw), headers={"content-type": "application/json"})
    assert "content-length" not in r.request.headers
    check_error(r, 413, "payload_too_large", "max_body_bytes=2048")
    form = b"source=en&target=es&api_key=key-one&q=" + b"cat+" * 1000
    headers = {"content-type": "application/x-www-form-urlencoded"}
    check_error(HTTP.post(guarded.url + "/translate", content=chunks(form), headers=headers), 413, "payload_too_large")
    small = httpx.Request("POST", "http://x", json={**OK_BODY, "api_key": "key-one"}).content
    r = HTTP.post(guarded.url + "/translate", content=chunks(small, 8), headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert translate(guarded.url, "the cat sleeps", api_key="key-one").status_code == 200
