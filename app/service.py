"""The service: loaded models and their engines, routing by language pair, readiness and draining."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

import model as model_pkg
from app.engine.engine import Engine
from app.engine.scheduler import Limits
from app.errors import ApiError
from app.languages import Detector
from app.metrics import Metrics
from app.settings import Settings
from model.checkpoint import Checkpoint, load
from model.generate import generate
from model.params import DecodeParams
from model.search import Request
from model.static import StaticDecoder
from model.transformer import Seq2SeqTransformer

log = logging.getLogger("mt.service")
BUILTIN = Path(model_pkg.__file__).parent / "builtin" / "en-es"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass
class ModelEntry:
    """A served model: its checkpoint and the engine that owns it."""

    checkpoint: Checkpoint
    engine: Engine

    @property
    def name(self) -> str:
        """The model's name, e.g. "en-es"."""
        return self.checkpoint.name


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


def pick_dtype(setting: str, device: str) -> torch.dtype:
    """ "auto" -> bfloat16/float16 on GPU, float32 on CPU."""
    if setting != "auto":
        return DTYPES[setting]
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def decoder(model: Seq2SeqTransformer, s: Settings) -> Seq2SeqTransformer | StaticDecoder:
    """The model as its engine runs it: on CUDA behind static shapes, the decode step captured as CUDA graphs (unless
    cuda_graphs is off: then the same step runs eagerly); elsewhere the model itself."""
    if model.device.type != "cuda":
        return model
    static = StaticDecoder(model, max(s.max_batch_size, s.max_beam_size), s.max_new_tokens, s.max_input_tokens)
    if s.cuda_graphs:
        start = time.perf_counter()
        count = static.capture()
        log.info("captured %d CUDA graphs of the decode step in %.1fs", count, time.perf_counter() - start)
    return static


class Service:
    """Owns models, engines and readiness; the HTTP layer reaches everything through it."""

    def __init__(self, settings: Settings):
        self.settings, self.metrics = settings, Metrics()
        self.models: dict[str, ModelEntry] = {}
        self.loaded = False
        self.draining = False
        self.load_error: str | None = None
        self.inflight = 0
        self.started = time.time()
        self.detector = Detector()
        self.on_fatal: Callable[[str], None] = lambda reason: None  # python -m app exits non-zero

    def start_loading(self) -> threading.Thread:
        """Load, warm up and start every model in the background; ready turns 200 when done."""
        thread = threading.Thread(target=self._load_all, name="loader", daemon=True)
        thread.start()
        return thread

    def _load_all(self) -> None:
        """Load each model spec (the built-in model when none is given)."""
        s = self.settings
        device = pick_device(s.device)
        dtype = pick_dtype(s.dtype, device)
        try:
            self.detector.load()
            for spec in s.models or [str(BUILTIN)]:
                pair, path = parse_spec(spec)
                ck = load(path, device=device, dtype=dtype, pair=pair)
                if ck.name in self.models:
                    raise ValueError(f"two models serve {ck.name}")
                runner = decoder(ck.model, s)
                self._warm_up(ck, runner)
                limits = Limits(s.max_batch_size, s.max_batch_tokens, s.max_prefill_tokens)
                engine = Engine(ck.name, runner, limits, self.metrics, s.max_queue, s.max_wait_ms)
                engine.start()
                self.models[ck.name] = ModelEntry(ck, engine)
                log.info("loaded %s from %s on %s/%s", ck.name, ck.path, device, dtype)
            self.loaded = True
        except Exception as exc:  # the process exits (python -m app); in-process, /health reports it
            log.debug("model loading failed", exc_info=True)
            self.load_error = f"{type(exc).__name__}: {exc}"
            log.error("model loading failed: %s", self.load_error)
            self.on_fatal(f"model loading failed: {self.load_error}")

    def _warm_up(self, ck: Checkpoint, runner: Seq2SeqTransformer | StaticDecoder) -> None:
        """Run a few translations so first requests do not pay for lazy initialisation."""
        ids = ck.tokenizer.encode("Hello, world. This is a warm-up sentence.")
        for i in range(self.settings.warmup_rounds):
            reqs = [Request(j, ids, DecodeParams(beam_size=1 + (i + j) % 2, max_new_tokens=16)) for j in range(4)]
            generate(runner, reqs)

    def broken(self) -> str | None:
        """Why this process can never serve again (loading failed, an engine died), else None."""
        if self.load_error:
            return f"model loading failed: {self.load_error}"
        dead = [name for name, m in self.models.items() if not m.engine.alive]
        return f"engine stopped: {', '.join(dead)}" if dead else None

    def readiness(self) -> tuple[bool, str]:
        """(ready, reason): loaded, warmed up, every engine alive and not draining."""
        if (why := self.broken()) is not None:
            return False, why
        if not self.loaded:
            return False, "loading models"
        if self.draining:
            return False, "draining"
        return True, "ready"

    def require_ready(self) -> None:
        """Raise 503 not_ready unless the service accepts work."""
        ok, reason = self.readiness()
        if not ok:
            raise ApiError(503, "not_ready", f"not ready: {reason}", {"Retry-After": "5"})

    def pairs(self) -> list[tuple[str, str]]:
        """Every (source, target) some loaded model serves."""
        return sorted({pair for m in self.models.values() for pair in m.checkpoint.languages.pairs()})

    def sources_into(self, target: str) -> list[str]:
        """Source languages that some model translates into `target`."""
        return sorted({s for s, t in self.pairs() if t == target})

    def route(self, source: str, target: str) -> ModelEntry:
        """The model for source->target (400 unsupported_language naming the pairs served)."""
        entry = next((m for m in self.models.values() if m.checkpoint.languages.serves(source, target)), None)
        if entry is None:
            pairs = [f"{a}-{b}" for a, b in self.pairs()]
            served = pairs if len(pairs) <= 20 else f"{len(pairs)} pairs, see GET /languages"
            raise ApiError(
                400, "unsupported_language", f"no model for source '{source}' -> target '{target}'; served: {served}"
            )
        return entry

    def wait_drained(self, timeout: float) -> None:
        """Block until in-flight HTTP requests finish or `timeout` passes."""
        deadline = time.monotonic() + timeout
        while self.inflight > 0 and time.monotonic() < deadline:
            time.sleep(0.05)

    def shutdown(self) -> None:
        """Stop every engine."""
        for entry in self.models.values():
            entry.engine.stop()
