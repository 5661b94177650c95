"""Building an engine core: load one model on its device and precision, size its budget, wrap it for decoding
(static shapes and CUDA graphs on a GPU), warm it up, and put the scheduler's limits around it."""

from __future__ import annotations

import logging
import time

import torch

from app.engine.budget import Budget, available_memory, batch_budget, cuda_cache_memory
from app.engine.card import ModelCard
from app.engine.core import EngineCore
from app.engine.scheduler import Limits
from app.metrics import Metrics
from app.settings import Settings
from model.confidence import Scorer, for_checkpoint, source_table
from model.confidence import load as load_calibration
from model.loading.checkpoint import Checkpoint, describe, load
from model.network.precision import bf16_speedup, choose
from model.network.screened import MIN_SCREEN, SCREEN, screened
from model.network.transformer import Seq2SeqTransformer
from model.runner import Runner
from model.runner.constraints import Words
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request
from model.runner.static import StaticDecoder

log = logging.getLogger("mt.core")


def parse_spec(spec: str) -> tuple[tuple[str, str] | None, str]:
    """ "en-es=DIR" -> (("en", "es"), DIR); "DIR" -> (None, DIR)."""
    if "=" in spec:
        pair, path = spec.split("=", 1)
        src, sep, tgt = pair.partition("-")
        if not (src and sep and tgt):
            raise ValueError(f"model spec {spec!r}: expected SRC-TGT=DIR")
        return (src, tgt), path
    return None, spec


def pick_device(setting: str) -> str:
    """ "auto" -> cuda when present, else cpu."""
    if setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return setting


def decoder(model: Seq2SeqTransformer, s: Settings, rows: int) -> Runner:
    """The model as its engine runs it: on CUDA behind static shapes (`rows` rows, max_batch_size source slots), the
    decode step captured as CUDA graphs (unless cuda_graphs is off: then the same step runs eagerly); elsewhere the
    model itself."""
    if model.device.type != "cuda":
        return model
    sizes = (rows, s.max_new_tokens, s.max_input_tokens, s.max_beam_size, s.max_batch_size)
    static = StaticDecoder(model, *sizes)
    log.info("static decode step: %d rows, %d source slots, row sizes %s", rows, static.slots, static.rows)
    if s.cuda_graphs:
        start = time.perf_counter()
        count = static.capture()
        log.info("captured %d CUDA graphs of the decode step in %.1fs", count, time.perf_counter() - start)
    return static


def warm_up(checkpoint: Checkpoint, runner: Runner, rounds: int) -> None:
    """Run a few translations so that first requests do not pay for lazy initialisation."""
    ids = checkpoint.tokenizer.encode("Hello, world. This is a warm-up sentence.")
    for i in range(rounds):
        reqs = [Request(j, ids, DecodeParams(beam_size=1 + (i + j) % 2, max_new_tokens=16)) for j in range(4)]
        generate(runner, reqs)


def budget(model: Seq2SeqTransformer, s: Settings) -> Budget:
    """The core's row and cache-token budgets for this model on its device (logged); on CUDA call it before the
    static buffers exist, as it sizes them from the memory free after the weights."""
    cuda = model.device.type == "cuda"
    if cuda:
        free, total = torch.cuda.mem_get_info(model.device)
        memory = cuda_cache_memory(free, total, s.gpu_memory_utilization)
    else:
        memory = available_memory()
    b = batch_budget(s, model.cfg, cuda, model.tgt_embed.weight.element_size(), memory)
    log.info("batch budget: %d requests, %d rows, %d cache tokens (%s)", s.max_batch_size, b.rows, b.tokens, b.reason)
    return b


def make_core(
    name: str, runner: Runner, s: Settings, b: Budget | None = None, words: Words | None = None,
    scorer: Scorer | None = None,
) -> EngineCore:  # fmt: skip
    """An engine core over a loaded model (or its static decoder) with the settings' limits and its budget (sized
    here, from the model, when not given); `words`: its vocabulary's word starts (glossary terms kept whole);
    `scorer`: its confidence."""
    cuda, b = runner.device.type == "cuda", b or budget(runner, s)
    overhead = s.join_overhead or (0.1 if cuda else 1.0)
    limits = Limits(s.max_batch_size, b.rows, b.tokens, s.max_prefill_tokens, overhead, s.max_join_wait_ms / 1000)
    overlap = cuda if s.overlap is None else s.overlap  # on CPU nothing runs asynchronously: nothing to hide
    max_wait_ms = (2.0 if cuda else 0.0) if s.max_wait_ms is None else s.max_wait_ms
    return EngineCore(name, runner, limits, Metrics(), s.max_queue, max_wait_ms, overlap, words, scorer)


def scorer_of(checkpoint: Checkpoint, s: Settings) -> Scorer:
    """The model's confidence: the calibration confidence_file gives it, else its own file, else the default."""
    path = s.confidence_files.get(checkpoint.name) or s.confidence_files.get("*")
    calibration = load_calibration(path) if path else for_checkpoint(checkpoint.path)
    log.info("confidence of %s: %s", checkpoint.name, calibration.fitted_on or path)
    pieces = checkpoint.tokenizer.source_pieces(checkpoint.config.src_vocab_size)
    return Scorer(calibration, tuple(source_table(pieces)))


def build(spec: str, s: Settings, device: str) -> tuple[EngineCore, ModelCard]:
    """The engine core of a model spec ("DIR" or "SRC-TGT=DIR"), loaded, warmed up and ready to serve, and its card."""
    pair, path = parse_spec(spec)
    measure = (lambda: bf16_speedup(describe(path, pair).config)) if device == "cpu" else None  # auto's measurement
    precision, why = choose(s.dtype, device, measure=measure)
    log.info("dtype %s: %s (%s)", s.dtype, precision, why)
    checkpoint = load(path, device=device, dtype=precision, pair=pair)
    if screened(checkpoint.model):
        why += f"; vocabulary projection screened in bfloat16, its best {MIN_SCREEN}-{SCREEN} logits a row in float32"
        log.info("%s: the vocabulary projection screened in bfloat16 (model.network.screened)", checkpoint.name)
    b = budget(checkpoint.model, s)
    runner = decoder(checkpoint.model, s, b.rows)
    warm_up(checkpoint, runner, s.warmup_rounds)
    log.info("engine core %s: loaded %s on %s in %s", checkpoint.name, checkpoint.path, device, checkpoint.precision)
    words = Words.of(checkpoint.tokenizer.target_pieces(checkpoint.config.tgt_vocab_size), checkpoint.model.device)
    core = make_core(checkpoint.name, runner, s, b, words, scorer_of(checkpoint, s))
    card = ModelCard.of(checkpoint, why)
    card.batch = {"max_rows": b.rows, "max_tokens": b.tokens, "reason": b.reason}
    return core, card
