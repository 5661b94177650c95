"""Calibration files: the shipped one parses and rates in [0, 1], deterministically, better outputs higher; a file that
does not parse or fit the schema is refused with a message naming what is wrong (never a crash at request time)."""

import json

import pytest

from app.settings import BUILTIN
from model.confidence import DEFAULT, FILE, CalibrationError, dumps, features, for_checkpoint, parse, source_table
from model.runner.params import DecodeParams
from model.runner.search import Hypothesis, Signals

GREEDY = DecodeParams(confidence=True)
TABLE = source_table(["", "\u2581The", "house", "\u2581Big", "\u2581is", "\u2581/usr"])  # 0: no text, 2 continues


def _hyp(logprob: float, entropy: float, n: int = 6) -> Hypothesis:
    signals = Signals(n, logprob * n, logprob * 2, entropy * n, entropy * 2)
    return Hypothesis([5] * (n - 1), None, "eos", signals)


def test_features_of_a_source_and_an_output():
    x = features(_hyp(-0.5, 1.0), GREEDY, [1, 2, 3, 4, 0], TABLE)
    assert x["split"] == pytest.approx(4 / 3) and x["logprob"] == pytest.approx(-0.5)
    assert x["entropy"] == pytest.approx(1.0) and x["most"] == 2.0 and x["least"] == -1.0
    assert x["caps"] == pytest.approx(1 / 2) and x["nonalpha"] == 0  # "Big" after the first word; all letters
    assert features(_hyp(-0.5, 1.0), GREEDY, [1, 5], TABLE)["nonalpha"] == pytest.approx(1 / 7)  # "/" of "Theusr"
    beam = Hypothesis([5, 5, 5], -0.6, "eos")  # its score over 4 ** 1.0 (EOS counted): mean log-probability -0.6
    assert features(beam, DecodeParams(beam_size=4), [1, 3], TABLE)["logprob"] == pytest.approx(-0.6)


def test_the_shipped_calibration_rates_in_0_1_and_ranks_better_outputs_higher():
    cal = for_checkpoint(BUILTIN)
    assert (BUILTIN / FILE).is_file() and cal is not DEFAULT and cal.acceptable == 40
    src = [1, 2, 3, 4, 0]
    sure, unsure = _hyp(-0.1, 0.3), _hyp(-1.5, 3.0)
    values = [cal.confidence(h, GREEDY, src, TABLE) for h in (sure, unsure, sure)]
    assert all(0 <= v <= 1 for v in values) and values[0] == values[2] and values[0] > values[1]
    assert parse(dumps(cal)) == cal


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("{not json", "not JSON"),
        ('{"format": "other"}', "format"),
        ("BROKEN_ACCEPTABLE", "acceptable"),
        ("UNKNOWN_FEATURE", "one_row.features"),
        ("SHORT_WEIGHTS", "one_row"),
        ("NO_BEAM", "beam"),
    ],
)
def test_a_broken_calibration_is_refused_naming_what_is_wrong(text, names):
    good = json.loads(dumps(DEFAULT))
    broken = {
        "BROKEN_ACCEPTABLE": {**good, "acceptable": "high"},
        "UNKNOWN_FEATURE": {**good, "one_row": {**good["one_row"], "features": ["telepathy"]}},
        "SHORT_WEIGHTS": {**good, "one_row": {**good["one_row"], "weights": []}},
        "NO_BEAM": {k: v for k, v in good.items() if k != "beam"},
    }
    with pytest.raises(CalibrationError, match=names):
        parse(json.dumps(broken[text]) if text in broken else text, "calibration")
