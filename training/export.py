"""Export a training checkpoint as the native checkpoint the server loads (fp16 weights, < 30 MB)."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from model.loading.checkpoint import save_native
from model.network.config import ModelConfig
from model.network.transformer import Seq2SeqTransformer

WORK = Path("training/work")


def main() -> None:
    """Load run/last.pt, drop dropout and optimizer state, save to model/builtin/en-es."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--checkpoint", type=Path, default=WORK / "run" / "last.pt")
    p.add_argument("--out", type=Path, default=Path("model/builtin/en-es"))
    p.add_argument("--spm", type=Path, default=WORK / "spm.model")
    args = p.parse_args()
    saved = torch.load(args.checkpoint, map_location="cpu", weights_only=False)
    cfg = ModelConfig.from_dict({**saved["config"], "dropout": 0.0})
    model = Seq2SeqTransformer(cfg)
    model.load_state_dict(saved["model"])
    languages = [c for c in saved["args"].get("languages", "").split(",") if c]
    pieces = cfg.src_vocab_size - len(languages)  # a two-way model's language tokens follow the pieces
    tokens = {code: pieces + i for i, code in enumerate(languages)}
    save_native(model.half(), args.spm, args.out, "en", "es", tokens or None)
    size = sum(f.stat().st_size for f in args.out.iterdir()) / 1e6
    print(f"exported step {saved['state']['step']} to {args.out} ({size:.1f} MB)")


if __name__ == "__main__":
    main()
