"""Export a training checkpoint as the native checkpoint the server loads (fp16 weights, < 30 MB), or the average of
several checkpoints of one run (their weights' mean: the checkpoints of a run's last stretch averaged are steadier
than the last alone); with `--state`, also the (last) run's step, place in the epoch and log (`training.json`), so
that `training.train --init` goes on with the run from there on another machine (a checkpoint small enough to commit:
no optimizer moments)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from model.loading.checkpoint import save_native
from model.network.config import ModelConfig
from model.network.transformer import Seq2SeqTransformer

WORK = Path("training/work")
# What the server gives the model in sentence case (app.casing), by measurement on the held-out phrases: English typed
# in capitals, Title Case or lower case ("hello world" read as typed: "mundo hola"), Spanish in capitals or Title Case
# but not lower case (Spanish typed in
# lower case usually lacks its accents too, as the corpus's casing variants do, and the model reads that form best
# as typed: "Buenos dias" gave "Good Good Good", "buenos dias" "good morning").
CASING = {"en": "sentence", "es": "capitals"}


def main() -> None:
    """Load run/last.pt (or average checkpoints), drop dropout and optimizer state, save to model/builtin/en-es."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--checkpoint", type=Path, nargs="+", default=[WORK / "run" / "last.pt"], help="several: averaged")
    p.add_argument("--out", type=Path, default=Path("model/builtin/en-es"))
    p.add_argument("--spm", type=Path, default=WORK / "spm.model")
    p.add_argument("--state", action="store_true", help="also write the run's state (training.json) to go on from")
    args = p.parse_args()
    runs = [torch.load(path, map_location="cpu", weights_only=False) for path in args.checkpoint]
    saved = runs[-1]
    off = {"dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0}
    cfg = ModelConfig.from_dict({**saved["config"], **off})
    model = Seq2SeqTransformer(cfg)
    mean = lambda k, v: sum(r["model"][k].float() for r in runs) / len(runs) if v.is_floating_point() else v  # noqa: E731
    model.load_state_dict({k: mean(k, v) for k, v in saved["model"].items()})
    languages = [c for c in saved["args"].get("languages", "").split(",") if c]
    pieces = cfg.src_vocab_size - len(languages)  # a two-way model's language tokens follow the pieces
    tokens = {code: pieces + i for i, code in enumerate(languages)}
    save_native(model.half(), args.spm, args.out, "en", "es", tokens or None, casing=CASING)
    if args.state:
        (args.out / "training.json").write_text(json.dumps(saved["state"], indent=1) + "\n", encoding="utf-8")
    size = sum(f.stat().st_size for f in args.out.iterdir()) / 1e6
    steps = "+".join(str(r["state"]["step"]) for r in runs)
    print(f"exported step {steps} to {args.out} ({size:.1f} MB)")


if __name__ == "__main__":
    main()
