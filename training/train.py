"""Train the built-in model with the project's own network: resumable, checkpointed, time-boxed."""

from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from pathlib import Path

import sacrebleu
import sentencepiece as spm
import torch
import torch.nn.functional as F

from model.loading.checkpoint import load
from model.loading.tokenizer import Tokenizer
from model.network.config import ModelConfig
from model.network.transformer import Seq2SeqTransformer
from training.batches import collate, encode_corpus, make_batches
from training.common import EVERYDAY, WORK, read_lines, read_tsv
from training.evaluate import translate


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--run", type=Path, default=WORK / "run")
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--encoder-layers", type=int, default=3)
    p.add_argument("--decoder-layers", type=int, default=3)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--dropout", type=float, default=0.1, help="on embeddings and sublayer outputs")
    p.add_argument("--attention-dropout", type=float, default=0.0)
    p.add_argument("--activation-dropout", type=float, default=0.0, help="in the FFN (slow on CPU: its mask is large)")
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument(
        "--cooldown",
        default="",
        help="STEP:N: from STEP on, the learning rate falls linearly to 5%% of the schedule's over N steps (anneal the "
        "end of a run; can be added when resuming)",
    )
    p.add_argument("--keep", action="store_true", help="also keep each checkpoint as run/step<N>.pt")
    p.add_argument("--minutes", type=float, default=120.0, help="stop after this much training time (this run)")
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--save-every", type=float, default=10.0, help="minutes between checkpoints")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast (fast on AMX CPUs and GPUs)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dev-sentences", type=int, default=200, help="dev sentences translated at each checkpoint")
    p.add_argument("--init", type=Path, help="start from this exported model (same width, as many or more layers)")
    p.add_argument(
        "--languages",
        default="",
        help="two-way model: target-language codes (en,es) whose tokens follow the SentencePiece pieces; trains on "
        "train.src/train.tgt (each source line starts with its target's >>xx<< code), checks dev.en -> dev.es",
    )
    return p.parse_args()


def build(args: argparse.Namespace, vocab: int) -> Seq2SeqTransformer:
    """A fresh network with the chosen shape (shared vocabulary, tied output, pre-LN)."""
    cfg = ModelConfig(
        src_vocab_size=vocab,
        tgt_vocab_size=vocab,
        d_model=args.d_model,
        n_heads=args.heads,
        encoder_layers=args.encoder_layers,
        decoder_layers=args.decoder_layers,
        d_ff=args.ffn,
        activation="relu",
        pre_norm=True,
        scale_embedding=True,
        share_embeddings=True,
        tie_output=True,
        max_positions=256,
        dropout=args.dropout,
        attention_dropout=args.attention_dropout,
        activation_dropout=args.activation_dropout,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        decoder_start_id=0,
    )
    torch.manual_seed(args.seed)
    return Seq2SeqTransformer(cfg).init_weights()


def grow_from(model: Seq2SeqTransformer, path: Path) -> None:
    """Copy a trained model into this one; added layers and FFN units start with zero output projections, so
    the grown network computes exactly what the trained one did and training continues from there."""
    trained = load(path).model
    if trained.cfg.d_model != model.cfg.d_model:
        raise ValueError(f"{path} has d_model {trained.cfg.d_model}, not {model.cfg.d_model}: cannot grow in width")
    old = trained.state_dict()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name in old:
                param[tuple(slice(0, n) for n in old[name].shape)] = old[name]
                if name.endswith("fc2.weight"):
                    param[:, old[name].shape[1] :] = 0
            elif name.endswith(("out_proj.weight", "out_proj.bias", "fc2.weight", "fc2.bias")):
                param.zero_()


def start_from(model: Seq2SeqTransformer, path: Path, state: dict) -> dict:
    """`grow_from` an exported model; the training state to go on with: the run's own where it was exported with
    `--state` (its step, place in the epoch and log; AdamW's moments start anew, so the rate warms up again), else
    `state`."""
    grow_from(model, path)
    if not (path / "training.json").exists():
        return state
    went_on = json.loads((path / "training.json").read_text(encoding="utf-8"))
    return {**went_on, "rewarm": went_on["step"]}


def lr_at(step: int, args: argparse.Namespace, rewarm: int = 0) -> float:
    """Linear warmup, then inverse square-root decay (and, with --cooldown STEP:N, a linear fall to 5% after STEP);
    a run gone on from exported weights (`rewarm`: the step it started at, its optimizer's moments new) warms up again
    over --warmup steps."""
    lr = args.lr * min((step + 1) / args.warmup, math.sqrt(args.warmup / (step + 1)))
    if rewarm:
        lr *= min(1.0, (step - rewarm + 1) / args.warmup)
    if args.cooldown:
        start, steps = (int(x) for x in args.cooldown.split(":"))
        lr *= max(0.05, 1 - max(0, step - start) / steps)
    return lr


def dev_loss(model: Seq2SeqTransformer, batches: list[dict], bf16: bool) -> float:
    """Mean token cross-entropy (no smoothing) on the dev set."""
    model.eval()
    total, count = 0.0, 0
    device = next(model.parameters()).device.type
    with torch.inference_mode(), torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
        for b in batches:
            logits = model(b["src"], b["src_mask"], b["tgt_in"]).float()
            total += F.cross_entropy(logits.flatten(0, 1), b["labels"].flatten(), reduction="sum").item()
            count += int((b["labels"] != -100).sum())
    model.train()
    return total / max(count, 1)


def dev_chrf(
    model: Seq2SeqTransformer, tokenizer: Tokenizer, dev: tuple[list[str], list[str]], prefix: list[int] = ()
) -> float:
    """Greedy chrF on (the first sentences of) the dev set."""
    model.eval()
    with torch.inference_mode():
        hyps = translate(model, tokenizer, dev[0], beam=1, prefix=prefix)
    model.train()
    return round(sacrebleu.corpus_chrf(hyps, [dev[1]]).score, 2)


def main() -> None:
    """Train until the time budget is spent, saving `run/last.pt` regularly."""
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    args.run.mkdir(parents=True, exist_ok=True)
    spm_path = WORK / "spm.model"
    pieces = spm.SentencePieceProcessor(model_file=str(spm_path)).get_piece_size()
    codes = {code: pieces + i for i, code in enumerate(filter(None, args.languages.split(",")))}
    vocab = pieces + len(codes)
    if codes:
        pairs = encode_corpus(WORK / "train.src", WORK / "train.tgt", spm_path, WORK / "train2.pt", codes=codes)
        dev = encode_corpus(WORK / "dev.en", WORK / "dev.es", spm_path, WORK / "dev.pt")
        dev = [([codes["es"]] + a, b) for a, b in dev]
    else:
        pairs = encode_corpus(WORK / "train.en", WORK / "train.es", spm_path, WORK / "train.pt")
        dev = encode_corpus(WORK / "dev.en", WORK / "dev.es", spm_path, WORK / "dev.pt")
    prefix = [codes["es"]] if codes else []
    tokenizer = Tokenizer.from_files(spm_path, eos_id=1, pad_id=0, unk_id=2, specials=frozenset(codes.values()))
    dev_text = tuple(read_lines(WORK / f"dev.{lang}")[: args.dev_sentences] for lang in ("en", "es"))
    model = build(args, vocab).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01, fused=True)
    state = {"step": 0, "epoch": 0, "batch": 0, "tokens": 0, "seconds": 0.0, "log": []}
    ckpt = args.run / "last.pt"
    if ckpt.exists():
        saved = torch.load(ckpt, weights_only=False, map_location=args.device)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        state = saved["state"]
        print(f"resumed at step {state['step']} epoch {state['epoch']}", flush=True)
    elif args.init:
        state = start_from(model, args.init, state)
        print(f"started from {args.init} at step {state['step']}", flush=True)
    cfg = model.cfg
    dev_batches = [
        collate([dev[i] for i in b], cfg.pad_id, cfg.eos_id, cfg.decoder_start_id, args.device)
        for b in make_batches(dev, 4096, 0)
    ]
    (args.run / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
    print(f"{len(pairs)} pairs, {sum(p.numel() for p in model.parameters()):,} parameters", flush=True)

    epoch_tokens = sum(len(y) + 1 for _, y in pairs)

    def save() -> None:
        torch.save(
            {
                "model": model.state_dict(),
                "opt": opt.state_dict(),
                "state": state,
                "config": cfg.to_dict(),
                "args": {k: str(v) for k, v in vars(args).items()},
                "epoch_tokens": epoch_tokens,
            },
            ckpt,
        )

    start, last_save, window = time.time(), time.time(), (time.time(), state["tokens"])
    model.train()
    while True:
        batches = make_batches(pairs, args.max_tokens, args.seed + state["epoch"])
        while state["batch"] < len(batches):
            rows = [pairs[i] for i in batches[state["batch"]]]
            b = collate(rows, cfg.pad_id, cfg.eos_id, cfg.decoder_start_id, args.device)
            for group in opt.param_groups:
                group["lr"] = lr_at(state["step"], args, state.get("rewarm", 0))
            with torch.autocast(b["src"].device.type, dtype=torch.bfloat16, enabled=args.bf16):
                logits = model(b["src"], b["src_mask"], b["tgt_in"])
            loss = F.cross_entropy(
                logits.float().flatten(0, 1), b["labels"].flatten(), label_smoothing=args.label_smoothing
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            ntok = int((b["labels"] != -100).sum())
            state["step"] += 1
            state["batch"] += 1
            state["tokens"] += ntok
            if state["step"] % 20 == 0:
                rate = (state["tokens"] - window[1]) / (time.time() - window[0])
                window = (time.time(), state["tokens"])
                print(
                    f"step {state['step']} epoch {state['epoch']} loss {loss.item():.3f} tok/s {rate:.0f}", flush=True
                )
            done = time.time() - start > args.minutes * 60 or (args.max_steps and state["step"] >= args.max_steps)
            if done or time.time() - last_save > args.save_every * 60:
                dl, chrf = dev_loss(model, dev_batches, args.bf16), dev_chrf(model, tokenizer, dev_text, prefix)
                state["seconds"] = state.get("seconds", 0.0) + time.time() - last_save
                entry = {"step": state["step"], "tokens": state["tokens"], "dev_loss": dl, "chrf": chrf}
                if codes:  # the everyday phrases both ways
                    phrases = read_tsv(EVERYDAY)
                    en, es = [e for e, _ in phrases], [s for _, s in phrases]
                    entry["everyday_en_es"] = dev_chrf(model, tokenizer, (en, es), [codes["es"]])
                    entry["everyday_es_en"] = dev_chrf(model, tokenizer, (es, en), [codes["en"]])
                state["log"].append(entry)
                extra = "".join(f" {k} {entry[k]}" for k in ("everyday_en_es", "everyday_es_en") if k in entry)
                print(f"checkpoint step {state['step']} dev_loss {dl:.3f} dev_chrf {chrf}{extra}", flush=True)
                save()
                if args.keep:
                    shutil.copyfile(ckpt, args.run / f"step{state['step']}.pt")
                last_save = time.time()
            if done:
                return
        state["epoch"] += 1
        state["batch"] = 0


if __name__ == "__main__":
    main()
