"""The server against CTranslate2 on the CPU at NLLB-200-distilled-600M's shape and at OPUS-MT's, float32 and int8:
one text at a time, one POST of 16 texts greedy, one POST of 16 texts beam 4, every text exactly --new-tokens tokens.

    python -m bench.nllb_cpu                         # both shapes, float32,int8; writes its docs/benchmarks.md section
    python -m bench.nllb_cpu --before /work/main     # the server of another checkout takes the same turns
    python -m bench.nllb_cpu --tiny --repeats 1 --no-write     # smoke run

Each shape is a random checkpoint (bench.nllb / bench.marian, tokenizer files included) converted for CTranslate2.
For each shape and --dtype: a server (`python -m app --dtype D --no-cache`, OMP_NUM_THREADS=--threads; with --before a
second one from that checkout) and CTranslate2 (`compute_type` D, intra_threads=--threads, its own process, fed the
ids the server's tokenizer makes of the same texts) take turns cell by cell, the start rotating, --repeats times;
each cell's best time counts (the machine is shared). Tokens per second = texts x new tokens / wall seconds."""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import tempfile
import time
from pathlib import Path

import httpx

from bench import engines, marian, nllb
from bench.latency import ct2_engine, start_server
from bench.machine import machine_info, machine_line
from bench.report import DOC, command, log, write_section
from bench.timing import Isolated

SECTION = "## NLLB-600M and OPUS-MT shapes on CPU: the server against CTranslate2 on {cpu} (bench/nllb_cpu.py)"
ROOT = Path(__file__).resolve().parents[1]
SERVER, BEFORE, CT2 = "server", "server (--before)", "CT2"
CELLS = (("one text", 1, 1), ("16 greedy", 16, 1), ("16 beam 4", 16, 4))  # (name, texts per POST, beam)
SHAPES = {"nllb": ("NLLB-600M", "en", "es"), "opus": ("OPUS-MT", "en", "de")}  # label, source, target


def write_shape(key: str, out: Path, tiny: bool = False) -> Path:
    """The random checkpoint of a shape in `out` (reused when there; `tiny`: d_model 64, vocab 1000)."""
    if (out / "config.json").exists():
        return out
    if key == "nllb":
        return nllb.write(out, nllb.TINY if tiny else nllb.NLLB600M)
    return marian.write(out, marian.TINY if tiny else marian.OPUS)


def texts(n: int, seed: int = 3) -> list[str]:
    """Lines of 8-12 random lowercase words of letters both tiny tokenizers spell (NLLB's has no k, x, z: a letter it
    cannot spell would be kept literal, cutting the text into several units)."""
    rng = random.Random(seed)
    word = lambda: "".join(rng.choice("abcdefghijlmnoprstuvwy") for _ in range(rng.randint(2, 8)))  # noqa: E731
    return [" ".join(word() for _ in range(rng.randint(8, 12))) for _ in range(n)]


def post(client: httpx.Client, url: str, batch: list[str], lang: tuple[str, str], beam: int, new: int) -> None:
    """One POST of `batch`, exactly `new` tokens per text (checked)."""
    params = {"beam_size": beam, "max_new_tokens": new, "min_new_tokens": new, "split_sentences": False}
    body = {"q": batch if len(batch) > 1 else batch[0], "source": lang[0], "target": lang[1], "parameters": params}
    r = client.post(url + "/translate", json=body)
    r.raise_for_status()
    details = r.json()["details"]
    details = details if isinstance(details, list) else [details]
    assert all(d["generated_tokens"] == new for d in details), r.text[:300]


def core_peak_mib(server) -> float:
    """The peak resident memory (VmHWM) of a server's engine core, in MiB (0 when not found)."""
    from bench.harness.procs import has_torch, tree

    for pid in tree(server.proc.pid):
        if pid != server.proc.pid and has_torch(pid):
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
    return 0.0


def one(args, key: str, hf_dir: Path, ct2_dir: Path, dtype: str) -> dict[str, dict[str, float]]:
    """Best seconds per cell per contestant: {cell: {contestant: seconds}}, and {"peak MiB": {server: MiB}}."""
    _, *lang = SHAPES[key]
    lines = texts(16)
    from model.loading.checkpoint import describe

    tok = describe(hf_dir).tokenizer
    ids = [tok.encode(t) for t in lines]
    checkouts = {SERVER: ROOT} | ({BEFORE: args.before.resolve()} if args.before else {})
    best: dict[str, dict[str, float]] = {}
    with contextlib.ExitStack() as stack:
        spec = str(hf_dir) if key == "nllb" else f"en-de={hf_dir}"
        servers = {name: start_server(c, hf_dir, dtype, args.threads, spec) for name, c in checkouts.items()}
        for proc in servers.values():
            stack.callback(proc.stop)
        ct2 = Isolated(f"CT2 {dtype}", ct2_engine, (ct2_dir, dtype, args.threads), args.threads)
        stack.callback(ct2.close)
        urls = {name: proc.wait(timeout=900).url for name, proc in servers.items()}
        client = stack.enter_context(httpx.Client(timeout=1800))
        names = [*urls, CT2]
        for url in urls.values():  # warm-up: every shape of work once
            for _, n, beam in CELLS:
                post(client, url, lines[:n], tuple(lang), beam, 4)
        for _, n, beam in CELLS:
            ct2.run(ids[:n], beam, 4)
        for k in range(args.repeats):
            for c, (cell, n, beam) in enumerate(CELLS):
                for j in range(len(names)):
                    name = names[(k + c + j) % len(names)]
                    start = time.perf_counter()
                    if name == CT2:
                        out, seconds = ct2.timed(ids[:n], beam, args.new_tokens)
                        assert all(len(o) == args.new_tokens for o in out)
                    else:
                        post(client, urls[name], lines[:n], tuple(lang), beam, args.new_tokens)
                        seconds = time.perf_counter() - start
                    got = best.setdefault(cell, {})
                    got[name] = min(got.get(name, float("inf")), seconds)
        best["peak MiB"] = {name: core_peak_mib(proc) for name, proc in servers.items()}
    return best


def row(args, shape: str, dtype: str, best: dict[str, dict[str, float]]) -> str:
    """One table row: per cell tokens/s of each contestant and the server's ratio to CT2 (and to --before)."""
    cells = []
    for cell, n, _ in CELLS:
        t = best[cell]
        tps = {name: n * args.new_tokens / s for name, s in t.items()}
        text = f"**{tps[SERVER] / tps[CT2]:.2f}x** ({tps[SERVER]:.1f} vs {tps[CT2]:.1f})"
        if BEFORE in tps:
            text += f"; before {tps[BEFORE] / tps[CT2]:.2f}x ({tps[BEFORE]:.1f})"
        cells.append(text)
    peak = " / ".join(f"{best['peak MiB'][name]:,.0f}" for name in (SERVER, BEFORE) if name in best["peak MiB"])
    return f"| {shape} | {dtype} | " + " | ".join(cells) + f" | {peak} |"


def render(args, info: dict[str, str], rows: list[str], load: tuple[float, float]) -> str:
    """The markdown section."""
    before = f' "before" is the server of `{args.before}` (`--before`), taking the same turns.' if args.before else ""
    return "\n".join([
        SECTION.format(cpu=info["kind"]), "", f"Generated by `{command('bench.nllb_cpu')}` on {info['date']}.", "",
        machine_line(info, "ctranslate2") + f" Shared machine: load average {load[0]:.1f} before, {load[1]:.1f} after.",
        f"- Shapes: NLLB-600M ({nllb.describe(nllb.NLLB600M)}), OPUS-MT ({marian.describe(marian.OPUS)}); random "
        "weights, the same for both engines.",
        f"- Server: `python -m app --dtype D --no-cache`, OMP_NUM_THREADS={args.threads}; CTranslate2: compute_type D, "
        f"intra_threads={args.threads}, its own process, on the server tokenizer's ids of the same texts. Every text "
        f"exactly {args.new_tokens} new tokens; best of {args.repeats} interleaved turns (start rotating).{before}",
        "- Cells: server / CT2 in generated tokens per second (higher is better; > 1 means the server is faster).",
        "- Engine core peak RSS: VmHWM of the server's engine core process at the end (MiB; server / before).",
        "", "| shape | dtype | one text | one POST of 16, greedy | one POST of 16, beam 4 | core peak RSS (MiB) |",
        "|---|---|---|---|---|---|",
        *rows, "",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Build the shapes, time each dtype, print (and write) the section."""
    p = argparse.ArgumentParser(prog="python -m bench.nllb_cpu", description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="nllb,opus", help="comma list of nllb, opus")
    p.add_argument("--dtype", default="float32,int8", help="comma list of float32, int8")
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--before", type=Path, help="also serve from this checkout (its own app code), taking turns")
    p.add_argument("--tiny", action="store_true", help="tiny shapes (checks the script)")
    p.add_argument("--models", type=Path, help="keep the checkpoints here (default: a temporary folder)")
    p.add_argument("--output", type=Path, default=DOC)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_nllb_cpu_") as tmp:
        root = args.models or Path(tmp)
        load0, rows = os.getloadavg()[0], []
        for key in args.shapes.split(","):
            hf_dir = write_shape(key, root / key / "hf", args.tiny)
            ct2_dir = engines.ct2_convert(hf_dir, root / key / "ct2")
            for dtype in args.dtype.split(","):
                best = one(args, key, hf_dir, ct2_dir, dtype)
                rows.append(row(args, SHAPES[key][0] + " (tiny)" * args.tiny, dtype, best))
                log(rows[-1])
    section = render(args, machine_info("ctranslate2"), rows, (load0, os.getloadavg()[0]))
    print(section)
    if not args.no_write:
        write_section(args.output, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
