"""What the serving benchmarks send: the model, source sentences of spread lengths, and the requests of a load
(greedy, the checkpoint's default beam, or the two mixed), with the decoding parameters the server derives from them."""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from app.protect import find_spans, split_layout
from app.settings import Settings
from app.text import plain_layout

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = ROOT / "model" / "builtin" / "en-es"
SENTENCES = ROOT / "training" / "work" / "test.en"
LOADS = ("greedy", "default", "mixed")
LOAD_WORDS = {
    "greedy": "greedy",
    "default": "every request without beam_size (the checkpoint's default beam; one POST alike)",
    "mixed": "requests alternating between the checkpoint's default beam and greedy (one POST: the default beam)",
}


def model_dir(args: argparse.Namespace, tmp: Path) -> Path:
    """The model to benchmark: --tiny builds a random one, else --model or the built-in model."""
    if args.tiny:
        from bench.harness.fixtures import make_native

        return make_native(tmp / "tiny-en-es", seed=args.seed)
    path = (args.model or DEFAULT_MODEL).resolve()
    if not (path / "config.json").exists():
        raise SystemExit(f"no model at {path}: pass --model DIR (or --tiny for a smoke run)")
    return path


def candidate_sentences(seed: int) -> tuple[list[str], str]:
    """English source lines: training/work/test.en when present, else synthetic ones; and where they came from."""
    if SENTENCES.exists():
        lines = [s.strip() for s in SENTENCES.read_text(encoding="utf-8").splitlines()]
        lines = [s for s in lines if 3 <= len(s.split()) <= 60]
        if lines:
            return lines, str(SENTENCES.relative_to(ROOT))
    from bench.harness.fixtures import EN, corpus

    return [s.strip() for s in corpus(EN, n=2000, seed=seed)], "synthetic (bench.harness.fixtures.corpus)"


def one_unit(text: str, tokenizer) -> bool:
    """Whether the server translates `text` as one request: it cuts a text into sentences, and around what the
    vocabulary cannot spell, each piece a request (a row) of its own (a line of two sentences: two rows there, one
    offline, and a POST of max_batch_size such texts would overflow the batch)."""
    layout = split_layout(plain_layout(text, True), lambda t: find_spans(t, tokenizer.spells))
    return layout.units == [text.strip()]


def pick_sentences(tokenizer, n: int, max_tokens: int, seed: int) -> tuple[list[str], list[list[int]], str]:
    """n distinct sentences of evenly spread lengths (<= max_tokens source tokens), shuffled; texts and ids. Only
    lines the server translates whole (`one_unit`), so that both sides decode the same rows."""
    lines, origin = candidate_sentences(seed)
    encoded = {}
    for text in dict.fromkeys(lines):
        if not one_unit(text, tokenizer):
            continue
        ids = tokenizer.encode(text)
        if len(ids) <= max_tokens:
            encoded[text] = ids
    ranked = sorted(encoded, key=lambda t: (len(encoded[t]), t))
    if len(ranked) > n:
        ranked = [ranked[round(i * (len(ranked) - 1) / (n - 1))] for i in range(n)] if n > 1 else ranked[:1]
    random.Random(seed).shuffle(ranked)
    return ranked, [encoded[t] for t in ranked], origin


def thread_env(threads: int) -> dict[str, str]:
    """Environment pinning the intra-op thread count."""
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def decode_fields(new_tokens: int, forced: bool) -> dict:
    """The `parameters` of a greedy request: `new_tokens` at most (exactly, when forced)."""
    return {"beam_size": 1, "max_new_tokens": new_tokens, "min_new_tokens": new_tokens if forced else 0}


def load_fields(load: str, new_tokens: int) -> list[dict]:
    """The `parameters` of a load's requests, cycled: greedy, the checkpoint's default beam (no beam_size), or the
    two alternating; every one forced to `new_tokens` tokens."""
    greedy, default = (
        decode_fields(new_tokens, forced=True),
        {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens},
    )
    return {"greedy": [greedy], "default": [default], "mixed": [default, greedy]}[load]


def server_params(ck, fields: list[dict], rows: int) -> list:
    """The DecodeParams the server derives from each kind of request (its checkpoint defaults and limits)."""
    from app.planner import Ask, decode_params
    from app.schemas import Parameters

    settings = Settings(max_batch_size=rows)
    return [decode_params(Ask(ck.source_lang, ck.target_lang, Parameters(**f)), settings, ck) for f in fields]


def bodies(
    texts: list[str], n: int, fields: list[dict], stream: bool, pair: tuple[str, str], start: int = 0
) -> list[dict]:
    """n single-text bodies cycling through texts from `start`, request i with parameters fields[i % len(fields)]."""
    src, tgt = pair
    return [
        {
            "q": texts[(start + i) % len(texts)],
            "source": src,
            "target": tgt,
            "stream": stream,
            "parameters": fields[i % len(fields)],
        }
        for i in range(n)
    ]
