"""Precision against float32 on random OPUS-MT-shaped and NLLB-shaped networks: logit error and token agreement of
int8-ffn, int8 and bfloat16 (prepared as the server's --dtype prepares them); with --speed, their decoding speed.

    python -m bench.precision                 # OPUS-MT shape (d512 6+6, vocab 58101), NLLB width (d1024, 16 heads)
    python -m bench.precision --sentences 4 --new-tokens 8 --tiny    # smoke run
    python -m bench.precision --speed         # tokens/s of each precision on the built-in model, no quality run

float32 decodes greedily; its outputs are then teacher-forced through every precision: the logit error (max and
mean absolute, over the standard deviation of float32's logits), the share of positions whose argmax equals
float32's, and the share of sentences whose own greedy output equals float32's. Speed: greedy and beam 4 at batch
1, 16 and 64 (random sources, `--new-tokens` forced), the precisions taking turns batch by batch in this process,
tokens per CPU second of this process (at one thread: the time it ran, whatever else the machine ran meanwhile), the
best of `--repeats` passes."""

from __future__ import annotations

import argparse
import copy
import json

import torch

from bench import engines
from bench.marian import OPUS, TINY, hf_model, ours_of, sources
from bench.report import ratio
from bench.timing import Local, time_cell
from model.loading.checkpoint import load
from model.network.precision import prepare
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request

PRECISIONS = ("int8-ffn", "int8", "bfloat16")  # against float32
NLLB = {"d_model": 1024, "layers": 3, "heads": 16, "ffn": 4096, "vocab": 32000}  # NLLB-600M's width, fewer layers


def nllb_model(shape: dict, seed: int = 0) -> torch.nn.Module:
    """Ours with the weights of a random M2M100 (NLLB's architecture: pre-LN, ReLU, scaled embeddings)."""
    from transformers import M2M100Config, M2M100ForConditionalGeneration

    from model.loading.checkpoint import hf_network
    from model.loading.hf import hf_config

    cfg = M2M100Config(
        vocab_size=shape["vocab"], d_model=shape["d_model"], encoder_layers=shape["layers"],
        decoder_layers=shape["layers"], encoder_attention_heads=shape["heads"], decoder_attention_heads=shape["heads"],
        encoder_ffn_dim=shape["ffn"], decoder_ffn_dim=shape["ffn"], scale_embedding=True, max_position_embeddings=256,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
    )  # fmt: skip
    torch.manual_seed(seed)
    hf = M2M100ForConditionalGeneration(cfg).eval()
    return hf_network(hf_config(cfg.to_dict()), hf.state_dict()).eval()


def greedy(model, srcs: list[list[int]], new: int) -> list[list[int]]:
    """Greedy outputs, exactly `new` tokens each."""
    params = DecodeParams(max_new_tokens=new, min_new_tokens=new, return_scores=False)
    return [h[0].tokens for h in generate(model, [Request(i, s, params) for i, s in enumerate(srcs)])]


@torch.inference_mode()
def teacher_forced(model, srcs: list[list[int]], outs: list[list[int]], pad: int, start: int) -> torch.Tensor:
    """Float32 logits (B, T, V) of `outs` (shifted right after the start token) given `srcs`."""
    width = max(map(len, srcs))
    src = torch.tensor([s + [pad] * (width - len(s)) for s in srcs])
    tgt = torch.tensor([[start, *o[:-1]] for o in outs])
    return model(src, src != pad, tgt).float()


def compare(name: str, network, srcs: list[list[int]], new: int) -> dict:
    """int8 and bf16 of one float32 network (not yet prepared) against its float32."""
    fp32, cfg, result = prepare(copy.deepcopy(network), "float32"), network.cfg, {}
    ref_out = greedy(fp32, srcs, new)
    ref = teacher_forced(fp32, srcs, ref_out, cfg.pad_id, cfg.decoder_start_id)
    for precision in PRECISIONS:
        other = prepare(copy.deepcopy(network), precision)
        logits = teacher_forced(other, srcs, ref_out, cfg.pad_id, cfg.decoder_start_id)
        err = (logits - ref).abs()
        own = greedy(other, srcs, new)
        result[precision] = {
            "max_abs_error / logit std": round(float(err.max() / ref.std()), 4),
            "mean_abs_error / logit std": round(float(err.mean() / ref.std()), 5),
            "argmax agreement (teacher-forced)": round(float((logits.argmax(-1) == ref.argmax(-1)).float().mean()), 4),
            "identical greedy outputs": round(sum(a == b for a, b in zip(own, ref_out, strict=True)) / len(srcs), 4),
        }
    return {name: result}


def speed(model_dir: str, batches: list[int], new: int, sentences: int, repeats: int) -> str:
    """Markdown: tokens per CPU second of float32 and each precision (as the server loads them, best of `repeats`
    interleaved passes), and the ratios."""
    names = ["float32", *PRECISIONS]
    models = {p: load(model_dir, dtype=p).model for p in names}
    runners = [Local(p, engines.ours(m)) for p, m in models.items()]
    srcs = sources(sentences, models["float32"].cfg.src_vocab_size, eos=models["float32"].cfg.eos_id, first=3)
    head = ["mode", "batch", *names, *(f"{p} / float32" for p in PRECISIONS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for beam in (1, 4):
        for batch in batches:
            tps = dict.fromkeys(names, 0.0)
            for _ in range(repeats):
                for n, c in time_cell(runners, srcs[: 4 if batch == 1 else sentences], batch, beam, new).items():
                    tps[n] = max(tps[n], c.tokens / c.cpu)
            row = ["greedy" if beam == 1 else f"beam {beam}", str(batch), *(f"{tps[n]:.0f}" for n in names)]
            lines.append("| " + " | ".join(row + [ratio(tps[p], tps["float32"]) for p in PRECISIONS]) + " |")
            print(lines[-1], flush=True)
    return "\n".join(lines)


def main() -> None:
    """Print the comparison as JSON (the speed table as markdown)."""
    p = argparse.ArgumentParser(prog="python -m bench.precision", description=__doc__.split("\n\n")[0])
    p.add_argument("--sentences", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--tiny", action="store_true", help="tiny shapes (checks the script)")
    p.add_argument("--speed", action="store_true", help="time the precisions instead (greedy and beam 4)")
    p.add_argument("--model", default="model/builtin/en-es", help="the model --speed times (default: built-in)")
    p.add_argument("--repeats", type=int, default=3, help="--speed: interleaved passes, best kept (default 3)")
    p.add_argument("--batch-sizes", type=lambda v: [int(b) for b in v.split(",")], default=[1, 16, 64])
    args = p.parse_args()
    if args.speed:
        print(speed(args.model, args.batch_sizes, args.new_tokens, args.sentences, args.repeats))
        return
    opus, nllb = (TINY, {**TINY, "vocab": 1000}) if args.tiny else (OPUS, NLLB)
    out, marian = {}, lambda s: ours_of(hf_model(s))
    for name, build, shape in (("OPUS-MT shape", marian, opus), ("NLLB shape", nllb_model, nllb)):
        network = build(shape)
        body = [s[:-1] for s in sources(args.sentences, shape["vocab"])]  # ids 2..vocab-2: away from pad/EOS below
        srcs = [[t % (shape["vocab"] - 4) + 3 for t in s] + [network.cfg.eos_id] for s in body]
        out |= compare(f"{name} ({', '.join(f'{k} {v}' for k, v in shape.items())})", network, srcs, args.new_tokens)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
