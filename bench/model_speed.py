"""Model-level decoding speed: our decoder vs `transformers` vs CTranslate2 on the same random Marian weights.

    python -m bench.model_speed                      # full run (~10 min on 2 busy cores), writes docs/benchmarks.md
    python -m bench.model_speed --sentences 16 --batch-sizes 1,16 --new-tokens 16 --skip-int8 --no-write  # quick

A random `transformers.MarianMTModel` (d_model 256, 3+3 layers, 4 heads, ffn 1024, vocab 8000) is saved with
`save_pretrained` next to tiny SentencePiece models and an 8000-entry vocab.json, then loaded three ways: by
`model.checkpoint.load` (ours), by `MarianMTModel.from_pretrained` (HF) and, converted, by CTranslate2. Source
sentences are random ids (10-40 tokens, the last one EOS) fed as ids (tokens as strings for CTranslate2). Every
engine is forced to generate exactly `--new-tokens` tokens per sentence, which is checked by counting its output.

Each engine runs in its own worker process (spawned), and the engines take turns chunk by chunk (the start rotates),
so load on the machine hits all of them alike while only one computes at a time; tokens/s = generated tokens of the
best hypothesis / wall time (timed inside the worker) summed over the chunks. Separate processes matter: CTranslate2
ships its own OpenMP runtime, and once it has run in a process, torch in that process slows down by a third or more
(`--same-process` shows it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing
import os
import platform
import random
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch

VOCAB = 8000
PAD = VOCAB - 1  # pad_token_id = decoder_start_token_id
EOS = 0
SECTION = "## Model decoding on {cpu} (bench/model_speed.py)"  # one section per CPU kind
DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
# Measured earlier on this shape (greedy, batch 1/16/64, tokens/s), for orientation only.
REFERENCE = {"HF fp32": (127, 944, 2069), "CT2 fp32": (146, 1029, 2340)}
TARGETS = [  # (numerator, denominator, minimum ratio, batch size: 0 = the largest), issue 22
    ("ours fp32", "CT2 fp32", 1.2, 0),
    ("ours int8", "CT2 int8", 1.3, 0),
    ("ours fp32", "HF fp32", 1.5, 0),
    ("ours int8", "CT2 int8", 1.5, 1),
]
ISA = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


# --------------------------------------------------------------------------- the checkpoint


def _spm_corpus(rng: random.Random, lines: int = 400) -> list[str]:
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 8))) for _ in range(300)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(5, 15))) for _ in range(lines)]


def build_marian(out: Path, seed: int = 0) -> Path:
    """A random Marian-shaped HF checkpoint with source/target SentencePiece models and an 8000-entry vocab.json."""
    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel

    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    corpus = out / "corpus.txt"
    corpus.write_text("\n".join(_spm_corpus(rng)) + "\n", encoding="utf-8")
    pieces: list[str] = []
    for side in ("source", "target"):
        spm.SentencePieceTrainer.train(
            input=str(corpus),
            model_prefix=str(out / side),
            vocab_size=150,
            model_type="unigram",
            character_coverage=1.0,
            eos_id=0,  # Marian layout: </s> 0, <unk> 1
            unk_id=1,
            bos_id=-1,
            pad_id=-1,
            minloglevel=2,
        )
        (out / f"{side}.model").replace(out / f"{side}.spm")
        (out / f"{side}.vocab").unlink()
        proc = spm.SentencePieceProcessor(model_file=str(out / f"{side}.spm"))
        pieces += [p for p in (proc.id_to_piece(i) for i in range(proc.get_piece_size())) if p not in pieces]
    corpus.unlink()
    vocab = {p: i for i, p in enumerate(pieces)}
    while len(vocab) < PAD:  # filler pieces up to 7999 entries, then <pad> last
        vocab[f"\u2581w{len(vocab)}"] = len(vocab)
    vocab["<pad>"] = PAD
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")

    cfg = MarianConfig(
        vocab_size=VOCAB,
        decoder_vocab_size=VOCAB,
        d_model=256,
        encoder_layers=3,
        decoder_layers=3,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=1024,
        decoder_ffn_dim=1024,
        activation_function="swish",
        max_position_embeddings=512,
        scale_embedding=True,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=PAD,
        forced_eos_token_id=None,  # default 0 would force EOS as the last of the 64 tokens
    )
    torch.manual_seed(seed)
    model = MarianMTModel(cfg).eval()
    with torch.no_grad():  # the decoder starts from the pad row: keep it zero as in real OPUS-MT (CT2 assumes it)
        model.model.shared.weight[PAD].zero_()
    model.save_pretrained(out)
    return out


def make_sources(n: int, seed: int = 1) -> list[list[int]]:
    """Random source ids, 10-40 tokens each including the final EOS; never pad/EOS inside."""
    rng = random.Random(seed)
    return [[rng.randrange(2, PAD) for _ in range(rng.randint(9, 39))] + [EOS] for _ in range(n)]


# --------------------------------------------------------------------------- engines


@dataclass
class Engine:
    """A name and a function (batch of source id lists, beam size, new tokens) -> best hypothesis ids per row."""

    name: str
    run: Callable[[list[list[int]], int, int], list[list[int]]]


def ours_engine(name: str, model: torch.nn.Module) -> Engine:
    from model.generate import generate
    from model.params import DecodeParams
    from model.search import Request

    def run(batch: list[list[int]], beam: int, new: int) -> list[list[int]]:
        # no per-step scores for greedy, as HF generate and CTranslate2 translate_batch compute none by default
        params = DecodeParams(beam_size=beam, max_new_tokens=new, min_new_tokens=new, return_scores=False)
        with torch.inference_mode():
            results = generate(model, [Request(i, src, params) for i, src in enumerate(batch)])
        return [hyps[0].tokens for hyps in results]

    return Engine(name, run)


def hf_engine(name: str, model: torch.nn.Module) -> Engine:
    from transformers import GenerationConfig

    def run(batch: list[list[int]], beam: int, new: int) -> list[list[int]]:
        width = max(map(len, batch))
        ids = torch.tensor([s + [PAD] * (width - len(s)) for s in batch])
        gen = GenerationConfig(
            decoder_start_token_id=PAD,
            eos_token_id=EOS,
            pad_token_id=PAD,
            bad_words_ids=[[PAD]],  # as OPUS-MT configs do; ours and CT2 never emit pad either
            num_beams=beam,
            do_sample=False,
            max_new_tokens=new,
            min_new_tokens=new,
            length_penalty=1.0,
            early_stopping=False,
        )
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=(ids != PAD).long(), generation_config=gen)
        rows = []
        for row in out[:, 1:].tolist():  # drop the decoder start token
            n = next((i for i, t in enumerate(row) if t in (EOS, PAD)), len(row))
            rows.append(row[:n])
        return rows

    return Engine(name, run)


def ct2_engine(name: str, translator, vocab: list[str]) -> Engine:
    index = {p: i for i, p in enumerate(vocab)}

    def run(batch: list[list[int]], beam: int, new: int) -> list[list[int]]:
        results = translator.translate_batch(
            [[vocab[i] for i in src] for src in batch],
            beam_size=beam,
            max_batch_size=len(batch),
            min_decoding_length=new,  # counts generated tokens only: no start token, EOS banned before it
            max_decoding_length=new,
        )
        return [[index[t] for t in r.hypotheses[0]] for r in results]

    return Engine(name, run)


def engine_names(int8: bool, bf16: bool) -> list[str]:
    """The engines of a run, in table order."""
    import ctranslate2

    ct2_bf16 = "bfloat16" in ctranslate2.get_supported_compute_types("cpu")  # not on every CPU (none without AMX)
    names = ["ours fp32", "HF fp32", "CT2 fp32"]
    return (
        names
        + (["ours int8", "CT2 int8"] if int8 else [])
        + (["ours bf16"] if bf16 else [])
        + (["CT2 bf16"] if bf16 and ct2_bf16 else [])
    )


def build_engine(name: str, path: Path, ct2_dir: Path, threads: int) -> Engine:
    """One engine by name, loaded from the saved Marian checkpoint (HF layout) or its CTranslate2 conversion."""
    if name.startswith("CT2"):
        import ctranslate2

        vocab = json.loads((ct2_dir / "shared_vocabulary.json").read_text(encoding="utf-8"))
        compute = {"CT2 fp32": "float32", "CT2 int8": "int8", "CT2 bf16": "bfloat16"}[name]
        opts = {"device": "cpu", "inter_threads": 1, "intra_threads": threads}
        return ct2_engine(name, ctranslate2.Translator(str(ct2_dir), compute_type=compute, **opts), vocab)
    if name == "HF fp32":
        from transformers import MarianMTModel
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        return hf_engine(name, MarianMTModel.from_pretrained(path).eval())
    from model.checkpoint import load

    precision = {"ours fp32": "float32", "ours int8": "int8", "ours bf16": "bfloat16"}[name]
    return ours_engine(name, load(path, dtype=precision).model)  # as the server's --dtype loads it


_WORKER: Engine | None = None  # the engine of a worker process


def _start_worker(name: str, path: Path, ct2_dir: Path, threads: int) -> None:
    """Worker initializer: set the thread count and load this process's one engine."""
    global _WORKER
    torch.set_num_threads(threads)
    _WORKER = build_engine(name, path, ct2_dir, threads)


def _timed_in_worker(batch: list[list[int]], beam: int, new: int) -> tuple[list[list[int]], float]:
    """Run the worker's engine on one batch; its outputs and wall seconds."""
    start = time.perf_counter()
    out = _WORKER.run(batch, beam, new)
    return out, time.perf_counter() - start


class Isolated:
    """An engine living in its own worker process (its own OpenMP runtime and thread pool)."""

    def __init__(self, name: str, path: Path, ct2_dir: Path, threads: int):
        self.name = name
        ctx = multiprocessing.get_context("spawn")
        args = (name, path, ct2_dir, threads)
        self.pool = ProcessPoolExecutor(1, mp_context=ctx, initializer=_start_worker, initargs=args)

    def timed(self, batch: list[list[int]], beam: int, new: int) -> tuple[list[list[int]], float]:
        return self.pool.submit(_timed_in_worker, batch, beam, new).result()

    def run(self, batch: list[list[int]], beam: int, new: int) -> list[list[int]]:
        return self.timed(batch, beam, new)[0]

    def close(self) -> None:
        self.pool.shutdown()


class Local:
    """An engine in this process (--same-process: every engine shares one process, as before)."""

    def __init__(self, name: str, path: Path, ct2_dir: Path, threads: int):
        self.engine = build_engine(name, path, ct2_dir, threads)
        self.name, self.run = name, self.engine.run

    def timed(self, batch: list[list[int]], beam: int, new: int) -> tuple[list[list[int]], float]:
        start = time.perf_counter()
        out = self.engine.run(batch, beam, new)
        return out, time.perf_counter() - start

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------- timing


@dataclass
class Cell:
    """One engine at one (mode, batch size): generated tokens, seconds, sentences, rows of the wrong length."""

    tokens: int = 0
    seconds: float = 0.0
    sentences: int = 0
    wrong_length: int = 0

    @property
    def tps(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def chunks(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def time_cell(
    engines: list[Isolated | Local], sources: list[list[int]], batch: int, beam: int, new: int
) -> dict[str, Cell]:
    """Warm every engine on this shape, then run them interleaved chunk by chunk, rotating who goes first."""
    parts = chunks(sources, batch)
    for e in engines:
        e.run(parts[0], beam, min(new, 8))
    cells = {e.name: Cell() for e in engines}
    for k, part in enumerate(parts):
        for j in range(len(engines)):
            e = engines[(k + j) % len(engines)]
            out, seconds = e.timed(part, beam, new)
            c = cells[e.name]
            c.tokens += sum(map(len, out))
            c.seconds += seconds
            c.sentences += len(part)
            c.wrong_length += sum(len(o) != new for o in out)
    return cells


def agreement(engines: list[Isolated | Local], sources: list[list[int]], new: int) -> dict[str, float]:
    """Share of greedy tokens equal to ours fp32's (same weights => near 1.0; int8/bf16 drift)."""
    outs = {e.name: e.run(sources, 1, new) for e in engines}
    ref = outs["ours fp32"]
    same = lambda a, b: sum(x == y for p, q in zip(a, b, strict=True) for x, y in zip(p, q, strict=False))
    total = sum(map(len, ref))
    return {name: same(ref, o) / total for name, o in outs.items() if name != "ours fp32"}


# --------------------------------------------------------------------------- report


def machine_info() -> dict[str, str]:
    import ctranslate2
    import transformers

    cpu, flags = platform.processor() or "?", ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        cpu = re.search(r"model name\s*:\s*(.*)", text).group(1).strip()
        flags = re.search(r"flags\s*:\s*(.*)", text).group(1)
    except (OSError, AttributeError):
        pass
    isa = [f for f in ISA if f in flags.split()]
    return {
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "cpu": cpu,
        "cores": f"{os.cpu_count()} logical, {len(os.sched_getaffinity(0))} usable",
        "isa": ", ".join(isa) or "-",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "ctranslate2": ctranslate2.__version__,
        "threads": str(torch.get_num_threads()),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset (libgomp default: spin, then sleep)"),
    }


def fmt_ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if a and b else "-"


def table(results: dict[tuple[str, int], dict[str, Cell]], names: list[str]) -> str:
    """Markdown: tokens/s per engine per (mode, batch) and the ratios."""
    ratio_cols = [("ours fp32", "HF fp32"), ("ours fp32", "CT2 fp32")]
    if "ours int8" in names and "CT2 int8" in names:
        ratio_cols.append(("ours int8", "CT2 int8"))
    if "ours bf16" in names:
        ratio_cols.append(("ours bf16", "CT2 bf16" if "CT2 bf16" in names else "CT2 fp32"))
    head = ["mode", "batch", "sentences", *names]
    head += [f"{a} / {b}" for a, b in ratio_cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (mode, batch), cells in results.items():
        row = [mode, str(batch), str(next(iter(cells.values())).sentences)]
        for n in names:
            c = cells[n]
            row.append(f"{c.tps:.0f}" + (" (!)" if c.wrong_length else ""))
        row += [fmt_ratio(cells[a].tps, cells[b].tps) for a, b in ratio_cols]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def target_lines(results: dict[tuple[str, int], dict[str, Cell]], names: list[str]) -> str:
    big = max(b for _, b in results)
    lines = ["| target | mode | batch | measured | met |", "|---|---|---|---|---|"]
    for mode in dict.fromkeys(m for m, _ in results):
        for a, b, want, batch in TARGETS:
            cells = results.get((mode, batch or big))
            if cells is None or a not in names or b not in names:
                continue
            r = cells[a].tps / cells[b].tps if cells[b].tps else 0.0
            met = "yes" if r >= want else "no"
            lines.append(f"| {a} / {b} >= {want:.1f}x | {mode} | {batch or big} | {r:.2f}x | {met} |")
    return "\n".join(lines)


def render(info: dict[str, str], args: argparse.Namespace, body: str, targets: str, notes: list[str]) -> str:
    cmd = "python -m bench.model_speed" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else "")
    parts = [
        SECTION.format(cpu=info["cpu"]),
        "",
        f"Generated by `{cmd}` on {info['date']}.",
        "",
        f"- Machine: {info['cpu']} ({info['cores']}; {info['isa']}); Python {info['python']}, "
        f"torch {info['torch']}, transformers {info['transformers']}, ctranslate2 {info['ctranslate2']}.",
        f"- Threads: torch.set_num_threads({info['threads']}); CTranslate2 inter_threads=1, "
        f"intra_threads={info['threads']}; OMP_WAIT_POLICY {info['omp_wait_policy']}.",
        "- Model: random `MarianMTModel` (d_model 256, 3+3 layers, 4 heads, ffn 1024, vocab 8000, swish), "
        "saved with `save_pretrained`; ours loads it with `model.checkpoint.load`, CTranslate2 gets "
        "`TransformersConverter(dir).convert(out, quantization=None)` and `compute_type` float32 / int8.",
        f"- Work: random source ids of 10-40 tokens (EOS last); {args.sentences} sentences per batch size, "
        f"{min(args.batch1_sentences, args.sentences)} at batch 1; exactly {args.new_tokens} new tokens "
        "forced per sentence (ours: `DecodeParams(min_new_tokens=max_new_tokens, return_scores=False)`, HF: "
        "`min_new_tokens=max_new_tokens`, CT2: `min_decoding_length=max_decoding_length`, which count generated "
        "tokens only), checked by counting each engine's output; beam rows count the best hypothesis.",
        "- Method: same fixed batches for all engines (CT2 `max_batch_size` = batch, called per batch); each "
        "engine warmed up on each shape; engines take turns batch by batch (rotating order), "
        + (
            "all in this one process (`--same-process`); "
            if args.same_process
            else "each in its own spawned worker process, so no two OpenMP runtimes share a process; "
        )
        + "tokens/s = generated tokens / `time.perf_counter` wall time around the engine's call.",
        "- int8 and bf16: ours = `model.checkpoint.load(dir, dtype=...)` as the server's `--dtype int8` / "
        "`bfloat16` loads it (int8: `torch.ao.quantization.quantize_dynamic` of every nn.Linear, x86 backend; bf16: "
        'the model cast to bfloat16), CT2 = `compute_type="int8"` / `"bfloat16"` (where CTranslate2 offers bfloat16 '
        "on this CPU; else ours bf16 is compared with CT2 fp32).",
        *[f"- {n}" for n in notes],
        "",
        "Tokens/s (higher is better):",
        "",
        body,
        "",
        targets,
        "",
    ]
    return "\n".join(parts)


def write_section(doc: Path, section: str, heading: str = SECTION) -> None:
    """Replace the section under `heading` of docs/benchmarks.md (up to the next '## ' heading), keeping the rest."""
    doc.parent.mkdir(parents=True, exist_ok=True)
    text = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    start = text.find(heading + "\n")
    if start < 0 and text.endswith(heading):
        start = len(text) - len(heading)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    else:
        nxt = re.search(r"^## ", text[start + len(heading) :], flags=re.M)
        end = start + len(heading) + nxt.start() if nxt else len(text)
        tail = text[end:]
        text = text[:start] + section.rstrip("\n") + "\n" + ("\n" + tail if tail else "")
    tmp = doc.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(doc)


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.model_speed", description=__doc__.split("\n\n")[0])
    ints = lambda s: [int(x) for x in s.split(",") if x]
    p.add_argument("--sentences", type=int, default=100, help="sentences per batch size (default 100)")
    p.add_argument("--batch1-sentences", type=int, default=16, help="sentences at batch size 1 (default 16)")
    p.add_argument("--batch-sizes", type=ints, default=[1, 16, 64], help="comma list (default 1,16,64)")
    p.add_argument("--beams", type=ints, default=[1, 4], help="beam sizes, 1 = greedy (default 1,4)")
    p.add_argument("--new-tokens", type=int, default=64, help="tokens forced per sentence (default 64)")
    p.add_argument("--threads", type=int, default=2, help="torch / CTranslate2 intra threads (default 2)")
    p.add_argument("--skip-int8", action="store_true", help="no int8 engines")
    p.add_argument("--skip-bf16", action="store_true", help="no bfloat16 row")
    p.add_argument("--workdir", type=Path, help="keep the generated checkpoints here (default: a temp dir)")
    p.add_argument("--output", type=Path, default=DOC, help=f"markdown file to update (default {DOC})")
    p.add_argument("--no-write", action="store_true", help="print only, leave the markdown file alone")
    p.add_argument(
        "--omp-wait-policy",
        choices=["passive", "active"],
        help="re-run with OMP_WAIT_POLICY set (libgomp reads it at start-up); passive keeps idle OpenMP threads "
        "from spinning, which matters on a machine shared with other busy processes",
    )
    p.add_argument(
        "--same-process",
        action="store_true",
        help="run every engine in this process instead of one worker process each (shows how CTranslate2's "
        "OpenMP runtime slows torch down when they share a process)",
    )
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.omp_wait_policy and os.environ.get("OMP_WAIT_POLICY", "").lower() != args.omp_wait_policy:
        os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy.upper()
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, "-m", "bench.model_speed", *(sys.argv[1:] if argv is None else argv)])
    torch.set_num_threads(args.threads)
    log = lambda *a: print(*a, file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="model_speed_") as tmp:
        work = args.workdir or Path(tmp)
        hf_dir, ct2_dir = work / "marian", work / "ct2"
        t0 = time.perf_counter()
        if not (hf_dir / "model.safetensors").exists():
            build_marian(hf_dir, args.seed)
        if not (ct2_dir / "model.bin").exists():
            import ctranslate2

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ctranslate2.converters.TransformersConverter(str(hf_dir)).convert(str(ct2_dir), quantization=None)
        names = engine_names(not args.skip_int8, not args.skip_bf16)
        host = Local if args.same_process else Isolated
        engines = [host(name, hf_dir, ct2_dir, args.threads) for name in names]
        log(f"built model and engines in {time.perf_counter() - t0:.1f}s: {', '.join(names)}")

        sources = make_sources(args.sentences, args.seed + 1)
        for e in engines:  # first touch: thread pools, allocators, oneDNN kernels
            e.run(sources[:16], 1, 8)
        agree = agreement(engines, sources[:16], args.new_tokens)
        log("greedy agreement with ours fp32: " + ", ".join(f"{k} {v:.1%}" for k, v in agree.items()))

        load_before = os.getloadavg()
        results: dict[tuple[str, int], dict[str, Cell]] = {}
        for beam in args.beams:
            mode = "greedy" if beam == 1 else f"beam {beam}"
            for batch in args.batch_sizes:
                n = min(args.batch1_sentences, args.sentences) if batch == 1 else args.sentences
                start = time.perf_counter()
                cells = time_cell(engines, sources[:n], batch, beam, args.new_tokens)
                results[(mode, batch)] = cells
                log(
                    f"{mode:>7} batch {batch:>3} ({time.perf_counter() - start:5.1f}s): "
                    + ", ".join(f"{k} {c.tps:.0f}" for k, c in cells.items())
                )
        load_after = os.getloadavg()
        for e in engines:
            e.close()
        wrong = {
            (m, b, k): c.wrong_length for (m, b), cells in results.items() for k, c in cells.items() if c.wrong_length
        }

    info = machine_info()
    notes = [
        f"Token-count check: every engine generated exactly {args.new_tokens} tokens for every sentence."
        if not wrong
        else f"Token-count check FAILED (rows marked (!)): {wrong}",
        "Greedy tokens equal to ours fp32 (16 sentences; random weights mostly repeat one token, so this is a "
        "weak check): " + ", ".join(f"{k} {v:.1%}" for k, v in agree.items()) + ".",
        f"Load average (1 min) {load_before[0]:.1f} before / {load_after[0]:.1f} after timing on "
        f"{os.cpu_count()} cores: absolute numbers are noisy, the ratios from this one interleaved run are what "
        "counts. Earlier greedy reference on this shape, batch 1/16/64: "
        + "; ".join(f"{k} {'/'.join(map(str, v))}" for k, v in REFERENCE.items())
        + " tokens/s.",
    ]
    if os.environ.get("OMP_WAIT_POLICY"):
        notes.append(
            f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}: on a machine shared with busy processes, libgomp's "
            "default spin-waiting makes torch (hundreds of short parallel regions per step) lose far more time "
            "than CTranslate2, which skews the ratios; on a dedicated machine run without --omp-wait-policy."
        )
    body, targets = table(results, names), target_lines(results, names)
    section = render(info, args, body, targets, notes)
    print(section)
    if not args.no_write:
        write_section(args.output, section, SECTION.format(cpu=info["cpu"]))
        log(f"wrote {args.output}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
