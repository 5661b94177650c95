"""In-process pieces for the engine and app tests: a model that fails on demand, an engine core driven by hand or
served over ZeroMQ from a thread, and a front Service connected to it."""

from __future__ import annotations

import os
import tempfile
import threading
import time

import torch

from app.engine.card import ModelCard
from app.engine.core import EngineCore
from app.engine.messages import Submit, Update, WireUnit
from app.engine.proc import serve
from app.engine.scheduler import Limits
from app.metrics import Metrics
from app.service import Service
from app.settings import Settings
from model.runner.eager import Eager
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request

TEXTS = ["the cat sleeps", "a big red dog runs in the city", "hello world", "the small green tree eats"]
POISON = "naïve café über niño"
FRONT = b"front"


class Faulty:
    """The real model, failing on demand: encode raises for a poisoned source; step_logits raises once when armed."""

    def __init__(self, model, poison: list[int]):
        self.model, self.poison = Eager(model), torch.tensor(poison)
        self.step_error: BaseException | None = None
        self.step_delay = 0.0  # seconds per decode step: a slow model, so timing cannot decide a test
        self.encoded: list[int] = []  # batch sizes encode saw

    def __getattr__(self, name):
        return getattr(self.model, name)

    def encode(self, src, src_mask, keep=None):
        self.encoded.append(src.shape[0])
        n = len(self.poison)
        if src.shape[1] >= n and bool((src[:, :n] == self.poison).all(1).any()):
            raise RuntimeError("poisoned input")
        return self.model.encode(src, src_mask, keep)

    def step_logits(self, state):
        if self.step_error is not None:
            error, self.step_error = self.step_error, None
            raise error
        if self.step_delay:
            time.sleep(self.step_delay)
        return self.model.step_logits(state)


class Fatal(BaseException):
    """Something the engine core cannot survive."""


def make_core(model, max_queue: int = 64, max_wait_ms: float = 0, rows: int = 8, overlap: bool = False) -> EngineCore:
    """An engine core over `model` (8 rows) with its own metrics."""
    return EngineCore("en-es", model, Limits(rows, rows, 65536, 4096), Metrics(), max_queue, max_wait_ms, overlap)


def submit(core: EngineCore, checkpoint, texts: list[str], first: int, stream: bool = False, **params) -> list[int]:
    """Queue `texts` as one job of FRONT with unit ids first, first+1, ...; the ids."""
    units = [WireUnit(first + k, checkpoint.tokenizer.encode(t)) for k, t in enumerate(texts)]
    core.submit(FRONT, Submit(first, DecodeParams(**params), units, stream, time.monotonic()))
    return [u.id for u in units]


def rounds(core: EngineCore, limit: int = 10_000) -> list[Update]:
    """Run rounds until the core is idle (or `limit` rounds); FRONT's Update of each round (empty when none)."""
    out = []
    while (wait := core.wait_s()) is not None and len(out) < limit:
        time.sleep(wait)
        core.run_round()
        out.append(core.flush().get(FRONT, Update()))
    return out


def oracle(checkpoint, text: str, **params):
    """model.runner.generate for one text."""
    return generate(checkpoint.model, [Request(0, checkpoint.tokenizer.encode(text), DecodeParams(**params))])[0]


class CoreThread:
    """An engine core served over ZeroMQ from a thread of this process, as its process would serve it."""

    def __init__(self, core: EngineCore, checkpoint):
        self.core = core
        self.address = f"ipc://{tempfile.mkdtemp(prefix='mt-test-')}/core.sock"
        self.stop_r, self.stop_w = os.pipe()
        card = ModelCard.of(checkpoint)
        self.thread = threading.Thread(target=self._serve, args=(card,), daemon=True)
        self.thread.start()

    def _serve(self, card: ModelCard) -> None:
        try:
            serve(self.core, card, self.address, self.stop_r)
        except Fatal:
            pass  # the thread ends as a crashed core process would: socket closed, nothing announced

    def stop(self) -> None:
        """Tell the loop to stop, as the launcher does, and wait for it."""
        if self.stop_w is not None:
            os.close(self.stop_w)
            self.stop_w = None
        self.thread.join(10)


def service_with(core_thread: CoreThread, **settings) -> Service:
    """A front Service connected to the core thread, sharing its metrics (one process, one registry)."""
    service = Service(Settings(**settings), [core_thread.address])
    service.metrics = core_thread.core.metrics
    return service
