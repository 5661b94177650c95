"""`python -m model.calibrate` on a tiny random model (mechanics only: its outputs have no quality to predict): pairs
whose reference is the model's own output are acceptable, the others not; the file it writes is one the server loads,
and it rates in [0, 1] (catches a file the server could not load, or a fit that fails on a real checkpoint)."""

import random

import pytest

from model.calibrate import main
from model.confidence import load, source_table
from model.loading.checkpoint import load as load_checkpoint
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request

WORDS = "the a house cat dog big small red green runs sleeps eats in city tree world".split()


def test_calibrate_writes_a_calibration_that_separates_good_from_bad(native_dir, tmp_path):
    ck = load_checkpoint(native_dir)
    rng = random.Random(0)
    sources = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8))) for _ in range(60)]
    params = DecodeParams(max_new_tokens=24, confidence=True)
    srcs = [ck.tokenizer.encode(s) for s in sources]
    outs = [h[0] for h in generate(ck.model, [Request(i, s, params) for i, s in enumerate(srcs)])]
    texts = [ck.tokenizer.decode(h.tokens) or "x" for h in outs]
    refs = [t if i % 2 else "zzzz qqqq" for i, t in enumerate(texts)]  # odd pairs acceptable (chrF 100), even not
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{s}\t{r}\n" for s, r in zip(sources, refs, strict=True)), encoding="utf-8")
    out = tmp_path / "confidence.json"
    main(["--model", str(native_dir), "--pairs", str(pairs), "--out", str(out), "--beam", "2",
          "--max-new-tokens", "24"])  # fmt: skip
    cal = load(out)
    starts = source_table(ck.tokenizer.source_pieces(ck.config.src_vocab_size))
    rated = [cal.confidence(h, params, s, starts) for h, s in zip(outs, srcs, strict=True)]
    assert all(0 <= r <= 1 for r in rated)
    assert cal.acceptable == 40 and cal.fitted_on == "pairs.tsv"


def test_calibrate_refuses_too_few_pairs(native_dir, tmp_path):
    pairs = tmp_path / "few.tsv"
    pairs.write_text("hello\thola\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        main(["--model", str(native_dir), "--pairs", str(pairs), "--out", str(tmp_path / "c.json")])
