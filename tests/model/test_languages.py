"""Checkpoint language codes -> the API's ISO 639-1 codes, one code per language token."""

import pytest

from model.loading.languages import Languages, api_codes, language_name


def test_nllb_codes_map_to_iso_639_1_once_each():
    nllb = pytest.importorskip("transformers.models.nllb.tokenization_nllb").FAIRSEQ_LANGUAGE_CODES
    codes = api_codes(nllb)
    assert len(codes) == len(nllb) == len(set(codes.values()))  # every token has its own API code
    expected = {"es": "spa_Latn", "ar": "arb_Arab", "zh": "zho_Hans", "zt": "zho_Hant", "fa": "pes_Arab",
                "ms": "zsm_Latn", "az": "azj_Latn", "ks": "kas_Arab", "ks-Deva": "kas_Deva", "ast": "ast_Latn"}
    assert {code: codes[code] for code in expected} == expected
    assert sum(len(c) == 2 for c in codes) > 130  # most have an ISO 639-1 code


def test_m2m100_mbart_and_opus_mt_codes():
    assert api_codes(["__en__", "__zh__", "__ast__"]) == {"en": "__en__", "zh": "__zh__", "ast": "__ast__"}
    assert api_codes(["en_XX", "zh_CN", "pt_XX"]) == {"en": "en_XX", "zh": "zh_CN", "pt": "pt_XX"}
    tokens = [">>fr<<", ">>spa<<", ">>pt_br<<", ">>cmn_Hans<<", ">>cmn_Hant<<", ">>por<<"]
    assert api_codes(tokens) == {
        "fr": ">>fr<<", "es": ">>spa<<", "pb": ">>pt_br<<", "zh": ">>cmn_Hans<<", "zt": ">>cmn_Hant<<", "pt": ">>por<<"
    }
    assert api_codes(["<pad>", "▁the", "en_US_x"]) == {}


def test_names_and_pairs():
    assert [language_name(c) for c in ("es", "zt", "ks-Deva", "qqq")] == [
        "Spanish", "Chinese (Traditional)", "Kashmiri (Deva)", "qqq"
    ]
    multi = Languages(("en", "es", "fr"), ("en", "es", "fr"), {"en": 10, "es": 11, "fr": 12}, forced=True)
    assert (multi.prefix("es", "fr"), multi.forced_bos("fr"), multi.serves("fr", "fr")) == ([11], 12, False)
    assert len(multi.pairs()) == 6 and (multi.source, multi.target) == ("mul", "mul")
    opus = Languages(("en",), ("fr", "it"), {"fr": 5, "it": 6})
    assert (opus.prefix("en", "it"), opus.forced_bos("it"), opus.source) == ([6], None, "en")
