"""A compiled CPU decode step at static shapes (inductor; padded like StaticDecoder pads steps for CUDA graphs) vs our
eager step and CTranslate2: step time, tokens/s, compile time, recompiles, logit error.

    python -m bench.compiled_step --part step --batch-sizes 1,16 --variants eager-fp32,inductor-onednn-cpp  # quick

`StaticStep` runs the model's own decoder modules over fixed-size K/V buffers: rows padded to StaticDecoder's sizes,
self-attention over a fixed span with a mask of each row's length, one source slot per row (greedy); the new K/V go
in by one index_put into the whole buffer per layer (through a sliced view, inductor copies the buffer back every
step). Each (rows, span, source span) is compiled once, `torch.compile(fullgraph=True, dynamic=False)`. At 1 thread,
timed by the CPU time of the process that runs them, interleaved and repeated: `--part step` times one mid-decode
step of every variant in this process; `--part engine` decodes greedily (`--new-tokens` forced), every engine in its
own process (ours eager or compiled through StaticDecoder's batch loop, CTranslate2 float32 and int8).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from bench import engines, marian
from bench.report import log
from model.layers import additive_mask
from model.precision import prepare
from model.runner.static import StaticDecoder

VARIANTS = {  # name -> (weights: float32 / onednn / int8 / pt2e, step: None eager, "static", or inductor config)
    "eager-fp32": ("float32", None),  # the served step: packed linears, dynamic shapes
    "eager-int8": ("int8", None),  # quantize_dynamic, dynamic shapes
    "static-fp32": ("float32", "static"),  # StaticStep without compiling: what padding costs
    "inductor": ("float32", {}),  # F.linear -> MKL addmm
    "inductor-frozen": ("float32", {"freezing": True}),  # freezing packs fp32 linears for MKL (mkl._mkl_linear)
    "inductor-onednn": ("onednn", {"freezing": True}),  # every linear through oneDNN's prepacked GEMM
    "inductor-onednn-cpp": ("onednn", {"freezing": True, "cpp_wrapper": True}),
    "pt2e-int8": ("pt2e", {"freezing": True}),  # torchao PT2E, X86InductorQuantizer(is_dynamic=True)
    "pt2e-int8-cpp": ("pt2e", {"freezing": True, "cpp_wrapper": True}),
}
SPAN = 64  # self and source positions of the padded step (StaticDecoder's span for up to 64 positions / tokens)


class OneDnnLinear(nn.Module):
    """A linear layer that always runs oneDNN's GEMM on a prepacked weight (model.packed's op, at every row count)."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.register_buffer("packed", torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach()))
        self.bias = linear.bias

    def forward(self, x: Tensor) -> Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


def swap_linears(model: nn.Module, make=OneDnnLinear) -> nn.Module:
    """The float32 `model` with every nn.Linear (PackedLinear too) replaced by make(linear), in place."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, make(child))
    return model


def plain_linear(linear: nn.Linear) -> nn.Linear:
    """An nn.Linear with `linear`'s parameters (a loaded float32 model's PackedLinear back to F.linear)."""
    plain = nn.Linear(linear.in_features, linear.out_features, bias=linear.bias is not None)
    plain.weight, plain.bias = linear.weight, linear.bias
    return plain


class StaticStep(nn.Module):
    """One greedy decode step of `model` over static buffers for `rows` rows, `positions` self positions and `source`
    source positions: (tokens (rows,), lengths (rows,), K/V buffers (L, R, H, T, D), cross K/V (L, G, H, S, D),
    source mask (G, S)) -> logits (rows, V); writes each row's new K/V at its length."""

    def __init__(self, model: nn.Module, rows: int, positions: int, source: int):
        super().__init__()
        self.model, self.rows, self.positions, self.source = model, rows, positions, source

    def forward(self, tokens, lengths, k_buf, v_buf, ck_buf, cv_buf, mask_buf) -> Tensor:
        m, n, t, s = self.model, self.rows, self.positions, self.source
        x = m._embed("tgt", tokens, lengths)[:, None]  # (n, 1, d)
        span = torch.arange(t, device=tokens.device)
        self_bias = additive_mask(span[None, :] <= lengths[:, None], x.dtype)[:, None, None, :]  # (n, 1, 1, t)
        src_bias = additive_mask(mask_buf[:n, :s], x.dtype)[:, None, None, :]  # (n, 1, 1, s)
        rows = torch.arange(n, device=tokens.device)
        for i, layer in enumerate(m.decoder):
            at = torch.full_like(rows, i)

            def self_attend(h: Tensor, i=i, at=at, layer=layer) -> Tensor:
                k, v = layer.self_attn.project_kv(h)  # (n, H, 1, D)
                k_buf[at, rows, :, lengths] = k[:, :, 0]  # one index_put into the whole buffer: no copy back
                v_buf[at, rows, :, lengths] = v[:, :, 0]
                return layer.self_attn(h, k_buf[i, :n, :, :t], v_buf[i, :n, :, :t], self_bias)

            x = layer.self_block(x, self_attend)
            cross = (ck_buf[i, :n, :, :s], cv_buf[i, :n, :, :s])
            x = layer.cross_block(x, lambda h, layer=layer, cross=cross: layer.cross_attn(h, *cross, src_bias))
            x = layer.ffn_block(x, layer.ffn)
        return m._logits(x[:, 0])


def pt2e_int8(step: StaticStep, example: tuple) -> nn.Module:
    """The step exported and quantized by torchao's PT2E flow with X86InductorQuantizer, dynamic int8 activations
    (per call) and per-channel int8 weights: inductor with freezing lowers it to oneDNN's int8 linear."""
    try:
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    except ImportError as exc:  # PT2E left torch for torchao (torch 2.13 has no torch.ao.quantization.quantize_pt2e)
        raise SystemExit("the pt2e variants need torchao: .venv/bin/pip install torchao==0.18.0") from exc

    quantizer = xiq.X86InductorQuantizer().set_global(xiq.get_default_x86_inductor_quantization_config(is_dynamic=True))
    prepared = prepare_pt2e(torch.export.export(step, example, strict=False).module(), quantizer)
    prepared(*example)  # one pass through the observers: without it the weights' scales are garbage (logits off by 10x)
    return convert_pt2e(prepared)


class Compiler:
    """Compiled StaticSteps of one variant, one per (rows, positions, source), compiled on first use; counts the
    graphs dynamo builds and the seconds each key took (first call included)."""

    def __init__(self, float_model: nn.Module, variant: str):
        weights, self.options = VARIANTS[variant]
        self.model = swap_linears(copy.deepcopy(float_model)) if weights == "onednn" else float_model
        self.pt2e = weights == "pt2e"
        self.steps: dict[tuple[int, int, int], nn.Module] = {}
        self.seconds: dict[tuple[int, int, int], float] = {}
        torch._dynamo.config.recompile_limit = 64  # one graph per key, several keys per code object

    def __call__(self, rows: int, positions: int, source: int, *args: Tensor) -> Tensor:
        """The step of this key on these inputs (compiled now if it is new)."""
        key = (rows, positions, source)
        if key in self.steps:
            return self.steps[key](*args)
        start = time.perf_counter()
        options = {} if self.options == "static" else self.options
        with warnings.catch_warnings(), torch._inductor.config.patch(options):  # options= alone: no freezing
            warnings.simplefilter("ignore")  # torch.ao / torchao deprecation notices
            step = StaticStep(self.model, *key).eval()
            if self.options == "static":
                self.steps[key] = step
            else:
                step = pt2e_int8(step, args) if self.pt2e else step
                # options too: backends with different options never share dynamo's cache entries of forward
                self.steps[key] = torch.compile(step, fullgraph=True, dynamic=False, options=self.options)
            out = self.steps[key](*args)
        self.seconds[key] = time.perf_counter() - start
        return out

    @staticmethod
    def graphs() -> int:
        """Graphs dynamo compiled so far in this process (a recompile of a known key adds one)."""
        return torch._dynamo.utils.counters["stats"]["unique_graphs"]


class CompiledDecoder(StaticDecoder):
    """StaticDecoder whose padded greedy step runs the variant's compiled StaticStep instead of the eager model (no CUDA
    graphs: on CPU the compiled code is the replay); encoder, prefill and beam steps stay eager, on `model` (float32 or
    int8: StaticDecoder sizes its buffers from a float model's weights, so it gets the compiler's float model)."""

    def __init__(self, model: nn.Module, compiler: Compiler, max_rows: int, float_model: nn.Module):
        super().__init__(float_model, max_rows, max_positions=SPAN, max_source=SPAN)
        self.model, self.compiler = model, compiler

    def _forward(self, rows: int, cache) -> None:
        if cache.padded_groups is not None:  # beams: the eager padded step
            return super()._forward(rows, cache)
        _, t, s = cache.shape
        buffers = (cache.k_buf, cache.v_buf, cache.ck_buf, cache.cv_buf, cache.mask_buf)
        self.logits[:rows].copy_(self.compiler(rows, t, s, self.tokens[:rows], cache.len_buf[:rows], *buffers))


def mid_state(model: nn.Module, sources: list[list[int]], steps: int):
    """A greedy batch of `sources` after `steps` eager padded steps, in StaticDecoder's buffers: (decoder, cache, key
    (rows, positions, source), step inputs)."""
    from model.params import DecodeParams
    from model.runner.batch import DecodeBatch
    from model.search import Request

    params = DecodeParams(beam_size=1, max_new_tokens=SPAN, min_new_tokens=SPAN, return_scores=False)
    decoder = StaticDecoder(model, len(sources), max_positions=SPAN, max_source=SPAN)
    batch = DecodeBatch.prefill(model, [Request(i, s, params) for i, s in enumerate(sources)])
    cache, tokens = batch.cache, batch.tokens
    for _ in range(steps):
        tokens = decoder.decode_step(tokens, cache).argmax(-1)
    rows, span, _ = decoder._key(cache)
    decoder.tokens[: len(sources)].copy_(tokens)
    args = (decoder.tokens[:rows], cache.len_buf[:rows], cache.k_buf, cache.v_buf, cache.ck_buf, cache.cv_buf,
            cache.mask_buf)  # fmt: skip
    return decoder, cache, (rows, min(span, SPAN), min(span, SPAN)), args


def step_fns(variants: list[str], float_model: nn.Module, models: dict, cache, key, args) -> dict:
    """{variant: () -> logits} of one mid-decode state: eager variants run the model's own dynamic step on the cache,
    the others their StaticStep (compiled on first call)."""
    n, fns = cache.rows, {}
    for name in variants:
        weights, options = VARIANTS[name]
        if options is None:
            fns[name] = lambda m=models[weights]: m.step_logits(args[0][:n], cache)
        else:
            compiler = Compiler(float_model, name)
            fns[name] = lambda c=compiler: c(*key, *args)[:n]
    return fns


@torch.inference_mode()
def step_part(args: argparse.Namespace, float_model: nn.Module) -> list[str]:
    """Markdown rows: every variant's step at each batch size on one mid-decode state (compile time, error, ms)."""
    models = {"float32": prepare(copy.deepcopy(float_model), "float32"),
              "int8": prepare(copy.deepcopy(float_model), "int8")}  # fmt: skip
    rows = []
    for batch in args.batch_sizes:
        cfg = float_model.cfg
        src = marian.sources(batch, cfg.src_vocab_size, eos=cfg.eos_id, first=3)  # past the specials
        _, cache, key, inputs = mid_state(models["float32"], src, SPAN // 2)
        fns = step_fns(args.variants, float_model, models, cache, key, inputs)
        ref, first = models["float32"].step_logits(inputs[0][: cache.rows], cache).clone(), {}
        for name, fn in fns.items():
            start = time.perf_counter()
            out = fn()
            first[name] = (time.perf_counter() - start, (out - ref).abs().max().item(),
                           (out.argmax(-1) == ref.argmax(-1)).float().mean().item())  # fmt: skip
        graphs, times = Compiler.graphs(), {name: [] for name in fns}
        iters = max(5, args.step_iters // batch)
        for _ in range(args.repeats):  # interleaved: every variant once per repeat
            for name, fn in fns.items():
                start = time.process_time()
                for _ in range(iters):
                    fn()
                times[name].append((time.process_time() - start) / iters)
        recompiled = Compiler.graphs() - graphs
        eager = statistics.median(times["eager-fp32"]) if "eager-fp32" in times else None
        for name, ts in times.items():
            seconds, err, agree = first[name]
            vs = f"{eager / statistics.median(ts):.2f}x" if eager else "-"
            ms = f"{min(ts) * 1e3:.3f} | {statistics.median(ts) * 1e3:.3f}"
            shape = "x".join(map(str, key))
            rows.append(f"| {batch} ({shape}) | {name} | {ms} | {vs} | {seconds:.1f} | {err:.2g} | {agree:.0%} |")
        log(f"step batch {batch}: done (graphs compiled while timing: {recompiled})")
        rows.append(f"| | graphs compiled while timing: {recompiled} | | | | | | |")
    return rows


STEP_HEAD = [
    "| batch (padded rows x span x source span) | variant | step ms, best | step ms, median | eager fp32 / variant "
    "(median) | first call s (compile) | max abs logit error vs eager fp32 | argmax = eager fp32 |",
    "|---|---|---|---|---|---|---|---|",
]


COMPILERS: list[Compiler] = []  # in an engine's worker process: its compiled steps


def build_engine(name: str, hf_dir, ct2_dir, threads: int, max_rows: int) -> engines.Engine:
    """One engine of the `engine` part, in its worker: CTranslate2 ("CT2 float32" / "CT2 int8"), ours eager at the
    server's --dtype, or a compiled variant through CompiledDecoder (encoder eager; int8 variants encode in int8)."""
    if name.startswith("CT2 "):
        return engines.ct2(ct2_dir, name.split()[1], threads)
    from model.checkpoint import load

    weights, options = VARIANTS[name]
    if options is None:
        return engines.ours(load(hf_dir, dtype=weights).model)
    float_model = swap_linears(load(hf_dir).model, plain_linear)
    eager = load(hf_dir, dtype="int8" if weights in ("int8", "pt2e") else "float32").model
    COMPILERS.append(Compiler(float_model, name))
    return engines.ours(CompiledDecoder(eager, COMPILERS[-1], max_rows, float_model))


def worker_stats() -> tuple[dict, int]:
    """In an engine's worker: ({key: compile seconds}, graphs dynamo compiled)."""
    return ({k: v for c in COMPILERS for k, v in c.seconds.items()}, Compiler.graphs() if COMPILERS else 0)


def engine_part(args: argparse.Namespace, hf_dir, ct2_dir) -> tuple[list[str], list[str]]:
    """Markdown rows (per batch size and engine: ms per step, tokens/s, ratios) and notes (compile, recompiles,
    agreement), every engine in its own process, interleaved batch by batch over `--repeats` rounds."""
    from bench.timing import Isolated

    names = [*args.variants, "CT2 float32", "CT2 int8"]
    runners = [Isolated(n, build_engine, (n, hf_dir, ct2_dir, 1, max(args.batch_sizes)), 1) for n in names]
    sources = marian.sources(args.sentences, marian.CPU["vocab"], 2)
    parts = {b: [sources[i : i + b] for i in range(0, len(sources) if b > 1 else args.batch1, b)]
             for b in args.batch_sizes}  # fmt: skip
    outs: dict[tuple[str, int], list] = {}
    for batch, ps in parts.items():  # warm-up: every shape compiled before timing
        for r in runners:
            outs[(r.name, batch)] = [o for p in ps for o in r.run(p, 1, args.new_tokens)]
    before = {r.name: r.pool.submit(worker_stats).result() for r in runners}
    cpu = {(r.name, b): [] for r in runners for b in parts}
    for k in range(args.repeats):
        for batch, ps in parts.items():
            for j, part in enumerate(ps):
                for i in range(len(runners)):
                    r = runners[(i + j + k) % len(runners)]
                    out, _, seconds = r.measured(part, 1, args.new_tokens)
                    assert all(len(o) == args.new_tokens for o in out), f"{r.name}: wrong length"
                    cpu[(r.name, batch)].append((seconds, len(part)))
        log(f"engine round {k + 1}/{args.repeats} done")
    after = {r.name: r.pool.submit(worker_stats).result() for r in runners}
    for r in runners:
        r.close()
    return engine_rows(names, parts, cpu, args.new_tokens), engine_notes(names, parts, outs, before, after)


def is_int8(name: str) -> bool:
    """Whether an engine runs int8 GEMMs."""
    return name == "CT2 int8" or (name in VARIANTS and VARIANTS[name][0] in ("int8", "pt2e"))


def engine_rows(names: list[str], parts: dict, cpu: dict, new: int) -> list[str]:
    """Markdown rows: per batch size and engine, CPU ms per decode step (best / median over batches, prefill included),
    tokens/s by CPU time, and the ratios to CTranslate2 of the same precision and to our eager float32."""
    rows = []
    for batch in parts:
        tps = {n: sum(r for _, r in cpu[(n, batch)]) * new / sum(s for s, _ in cpu[(n, batch)]) for n in names}
        for n in names:
            steps = [s / new for s, _ in cpu[(n, batch)]]
            ct2 = "CT2 int8" if is_int8(n) else "CT2 float32"
            ms = f"{min(steps) * 1e3:.3f} | {statistics.median(steps) * 1e3:.3f}"
            ratios = f"{tps[n] / tps[ct2]:.2f}x ({ct2}) | {tps[n] / tps[names[0]]:.2f}x"
            rows.append(f"| {batch} | {n} | {ms} | {tps[n]:.0f} | {ratios} |")
    return rows


ENGINE_HEAD = [
    "| batch | engine | ms per step, best | ms per step, median | tokens/s | vs CTranslate2 (same precision) | vs "
    "first engine |",
    "|---|---|---|---|---|---|---|",
]


def engine_notes(names: list[str], parts: dict, outs: dict, before: dict, after: dict) -> list[str]:
    """Compile seconds per key, graphs compiled while timing, and greedy agreement with the first engine."""
    notes = []
    for n in names:
        seconds, graphs = after[n]
        if seconds:
            keys = ", ".join(f"{k[0]}x{k[1]}x{k[2]} {s:.0f} s" for k, s in sorted(seconds.items()))
            notes.append(f"{n}: {len(seconds)} keys compiled (rows x span x source span: {keys}); graphs compiled "
                         f"while timing: {graphs - before[n][1]}")  # fmt: skip
    for n in names[1:]:
        same = tokens = equal = sentences = 0
        for batch in parts:
            for a, b in zip(outs[(names[0], batch)], outs[(n, batch)], strict=True):
                same += sum(x == y for x, y in zip(a, b, strict=True))
                tokens, equal, sentences = tokens + len(a), equal + (a == b), sentences + 1
        notes.append(
            f"{n}: greedy tokens equal to {names[0]}'s {same / tokens:.1%}, identical outputs {equal}/{sentences}"
        )
    return notes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(prog="python -m bench.compiled_step", description=__doc__.split("\n\n")[0])
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    names = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    p.add_argument("--part", choices=["step", "engine", "both"], default="both", help="what to measure (default both)")
    p.add_argument("--variants", type=names, default=list(VARIANTS),
                   help=f"comma list, the first is the reference (default all: {','.join(VARIANTS)})")  # fmt: skip
    p.add_argument("--batch-sizes", type=ints, default=[1, 16, 64], help="comma list (default 1,16,64)")
    p.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--step-iters", type=int, default=400, help="steps per timing at batch 1, / batch (default 400)")
    p.add_argument("--sentences", type=int, default=64, help="engine part: sentences per batch size (default 64)")
    p.add_argument("--batch1", type=int, default=4, help="engine part: sentences at batch 1 (default 4)")
    p.add_argument("--new-tokens", type=int, default=SPAN, help=f"engine part: tokens forced (default {SPAN})")
    p.add_argument(
        "--checkpoint", type=Path, help="step part: this model (e.g. model/builtin/en-es), not the random one"
    )
    p.add_argument("--workdir", type=Path, help="keep the random checkpoint and its CTranslate2 conversion here")
    args = p.parse_args(argv)
    if args.new_tokens > SPAN or not set(args.variants) <= set(VARIANTS):
        p.error(f"--new-tokens at most {SPAN}; --variants from {', '.join(VARIANTS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the parts, print markdown tables."""
    from model.checkpoint import load

    args = parse_args(argv)
    torch.set_num_threads(1)
    before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="compiled_step_") as tmp:
        work = args.workdir or Path(tmp)
        hf_dir = work / "marian"
        if not (hf_dir / "model.safetensors").exists() and (args.part != "step" or not args.checkpoint):
            marian.write(hf_dir, marian.CPU)
        if args.part in ("step", "both"):
            float_model = swap_linears(load(args.checkpoint or hf_dir).model, plain_linear)
            title = f"One decode step of {args.checkpoint or 'the random Marian'} (CPU ms, 1 thread):"
            print("\n".join([title, "", *STEP_HEAD, *step_part(args, float_model), ""]))
        if args.part in ("engine", "both"):
            rows, notes = engine_part(args, hf_dir, engines.ct2_convert(hf_dir, work / "ct2"))
            print("\n".join([f"Greedy decoding, {args.new_tokens} tokens forced (CPU time, 1 thread):", "",
                             *ENGINE_HEAD, *rows, "", *(f"- {n}" for n in notes), ""]))  # fmt: skip
    print(f"Load average {before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} shared cores.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
