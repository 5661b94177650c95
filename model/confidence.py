"""A translation's confidence in [0, 1], from what its decoding already has (no other model): glass-box signals
(Fomicheva et al. 2020: token log-probabilities, the output distributions' entropy) and the source's
shape (its length, how finely its words split into subword pieces), combined by a per-model logistic fit, calibrated
so that among outputs of confidence about c a share of about c are acceptable (sentence chrF of at least the
calibration's `acceptable` against a reference). A one-row output (greedy, sampled) has every signal; a beam search's
output has its score (its mean log-probability) and the source's shape, with a head of its own.

The built-in model ships its fit beside its weights (`confidence.json`); `python -m model.calibrate` fits another
model on reference pairs; a checkpoint with neither gets `DEFAULT`, a mapping of the mean log-probability alone."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from model.runner.params import DecodeParams
from model.runner.search import Hypothesis

FILE = "confidence.json"  # a checkpoint's own calibration, beside its weights
SOURCE = ("split", "length", "ratio", "caps", "nonalpha")  # the source's shape (and the output's length)
ONE_ROW = ("logprob", "least", "entropy", "most", *SOURCE)  # what a head may read
BEAM = ("logprob", *SOURCE)
Piece = tuple[int, int, int, int]  # per source id: word start 1 / inside 0 / no text -1, capitalised, chars, non-alpha


class CalibrationError(ValueError):
    """A calibration file that does not parse or does not fit the schema (the message names what is wrong)."""


@dataclass(frozen=True)
class Head:
    """A logistic model over named features: each standardised by its dev-set mean and scale."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float

    def __call__(self, x: dict[str, float]) -> float:
        """The probability that the output is acceptable, in [0, 1]."""
        z = self.bias + sum(
            w * (x[f] - m) / s for f, m, s, w in zip(self.features, self.mean, self.scale, self.weights, strict=True)
        )
        return 1 / (1 + math.exp(-z)) if z > -700 else 0.0


@dataclass(frozen=True)
class Calibration:
    """A model's confidence: its heads for one-row outputs ("one_row") and beam outputs ("beam"), the chrF it calls
    acceptable, and what it was fitted on."""

    acceptable: float
    one_row: Head
    beam: Head
    fitted_on: str = ""

    def confidence(self, hyp: Hypothesis, params: DecodeParams, src: Sequence[int], table: Sequence[Piece]) -> float:
        """The confidence of `hyp`, decoded from `src` with `params`; `table`: its vocabulary's `source_table`."""
        x = features(hyp, params, src, table)
        return self.one_row(x) if hyp.signals is not None else self.beam(x)


@dataclass(frozen=True)
class Scorer:
    """A served model's confidence: its calibration and its source vocabulary's table (`source_table`)."""

    calibration: Calibration
    table: tuple[Piece, ...]

    def __call__(self, hyp: Hypothesis, params: DecodeParams, src: Sequence[int]) -> float:
        """The confidence of `hyp`, decoded from `src` with `params`."""
        return self.calibration.confidence(hyp, params, src, self.table)


def features(hyp: Hypothesis, params: DecodeParams, src: Sequence[int], table: Sequence[Piece]) -> dict[str, float]:
    """The named features of an output: its signals per token (one-row outputs) or its score (beam outputs), and its
    source's shape: subword pieces per word, length, capitalised words after the first (names, products), the share
    of characters that are no letters (commands, paths, numbers); `table`: the source vocabulary's `source_table`."""
    pieces = [table[i] for i in src if i < len(table) and table[i][0] >= 0]
    starts = [p for p in pieces if p[0]]
    words = max(1, len(starts))
    x = {"split": len(pieces) / words, "length": math.log(len(pieces) + 1)}
    x["ratio"] = math.log((len(hyp.tokens) + 1) / (len(pieces) + 1))
    x["caps"] = sum(p[1] for p in starts[1:]) / max(1, len(starts) - 1)
    x["nonalpha"] = sum(p[3] for p in pieces) / max(1, sum(p[2] for p in pieces))
    s = hyp.signals
    if s is not None and s.count:
        n = s.count
        x.update(logprob=s.logprob / n, least=s.least, entropy=s.entropy / n, most=s.most)
    else:  # a beam score is the log-probability over length ** length_penalty (EOS counted)
        n = len(hyp.tokens) + (hyp.finish_reason == "eos")
        x["logprob"] = (hyp.score or 0.0) * max(n, 1) ** params.length_penalty / max(n, 1)
    return x


def source_table(pieces: Sequence[str]) -> list[Piece]:
    """What `features` reads of each source id, from the vocabulary's pieces ("" for special tokens): whether it
    starts a word (1), continues one (0) or is no text (-1), whether it starts a capitalised word, its characters and
    how many of them are no letters."""
    out = []
    for p in pieces:
        start, text = p.startswith("\u2581"), p.lstrip("\u2581")
        kind = int(start) if p else -1
        out.append((kind, int(start and text[:1].isupper()), len(text), sum(not c.isalpha() for c in text)))
    return out


def _head(raw: object, where: str, allowed: tuple[str, ...]) -> Head:
    """A head from its JSON object, checked."""
    if not isinstance(raw, dict):
        raise CalibrationError(f"{where}: expected an object")
    try:
        feats = tuple(raw["features"])
        cols = [tuple(float(v) for v in raw[k]) for k in ("mean", "scale", "weights")]
        bias = float(raw["bias"])
    except (KeyError, TypeError, ValueError) as exc:
        needs = "features, mean, scale, weights, bias"
        raise CalibrationError(f"{where}: {type(exc).__name__} {exc} (needs {needs})") from None
    if unknown := [f for f in feats if f not in allowed]:
        raise CalibrationError(f"{where}.features: unknown {unknown} (known: {', '.join(allowed)})")
    if any(len(c) != len(feats) for c in cols) or any(s <= 0 for s in cols[1]):
        raise CalibrationError(f"{where}: mean, scale and weights need one value per feature, scales > 0")
    if not all(math.isfinite(v) for c in cols for v in c) or not math.isfinite(bias):
        raise CalibrationError(f"{where}: values must be finite numbers")
    return Head(feats, *cols, bias)


def parse(text: str, where: str = "calibration") -> Calibration:
    """A calibration from its JSON text; CalibrationError naming what is wrong."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise CalibrationError(f"{where}: not JSON ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != "mt-confidence/1":
        raise CalibrationError(f'{where}: expected an object with "format": "mt-confidence/1"')
    acceptable = raw.get("acceptable")
    if not isinstance(acceptable, (int, float)) or not 0 <= acceptable <= 100:
        raise CalibrationError(f"{where}.acceptable: a chrF threshold in [0, 100]")
    heads = [_head(raw.get(k), f"{where}.{k}", allowed) for k, allowed in (("one_row", ONE_ROW), ("beam", BEAM))]
    return Calibration(float(acceptable), *heads, str(raw.get("fitted_on", "")))


def load(path: str | Path) -> Calibration:
    """A calibration file; CalibrationError naming the file and what is wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"{path}: {exc}") from None
    return parse(text, str(path))


def dumps(cal: Calibration) -> str:
    """A calibration as its JSON text."""
    return json.dumps({"format": "mt-confidence/1", **asdict(cal)}, indent=1) + "\n"


def for_checkpoint(path: str | Path) -> Calibration:
    """The checkpoint directory's own calibration, else `DEFAULT`."""
    own = Path(path) / FILE
    return load(own) if own.is_file() else DEFAULT


# Checkpoints users bring, until they calibrate them: the built-in model's fit of the mean token log-probability alone
# (acceptable: chrF >= 40); a log-probability scale that other models share only roughly (docs/operators.md).
_MEAN_ONLY = Head(("logprob",), (-0.38,), (0.176,), (0.608,), 2.08)  # sigmoid(3.45 * logprob + 3.39)
DEFAULT = Calibration(40.0, _MEAN_ONLY, _MEAN_ONLY, "default: mean token log-probability only")
