"""In-process pieces for the engine and app tests: a model that fails on demand, event listeners, a Service."""

from __future__ import annotations

import dataclasses
import threading
import time

import torch

from app.engine.engine import Engine
from app.engine.request import EngineRequest, Failed, Finished, Token
from app.service import ModelEntry, Service
from app.settings import Settings
from model.generate import generate
from model.params import DecodeParams
from model.search import Request

TEXTS = ["the cat sleeps", "a big red dog runs in the city", "hello world", "the small green tree eats"]
POISON = "naïve café über niño"


class Faulty:
    """The real model, failing on demand: encode raises for a poisoned source; decode_step raises once when armed."""

    def __init__(self, model, poison: list[int]):
        self.model, self.poison = model, torch.tensor(poison)
        self.step_error: BaseException | None = None
        self.step_delay = 0.0  # seconds per decode step: a slow model, so timing cannot decide a test
        self.encoded: list[int] = []  # batch sizes encode saw

    def __getattr__(self, name):
        return getattr(self.model, name)

    def encode(self, src, src_mask):
        self.encoded.append(src.shape[0])
        n = len(self.poison)
        if src.shape[1] >= n and bool((src[:, :n] == self.poison).all(1).any()):
            raise RuntimeError("poisoned input")
        return self.model.encode(src, src_mask)

    def decode_step(self, tokens, cache):
        if self.step_error is not None:
            error, self.step_error = self.step_error, None
            raise error
        if self.step_delay:
            time.sleep(self.step_delay)
        return self.model.decode_step(tokens, cache)


class Listener:
    """Collects one request's events (called from the engine thread)."""

    def __init__(self):
        self.events: list = []
        self.done = threading.Event()

    def __call__(self, event) -> None:
        self.events.append(event)
        if isinstance(event, Finished | Failed):
            self.done.set()

    def last(self, timeout: float = 30):
        """The final event."""
        assert self.done.wait(timeout), "no final event"
        return self.events[-1]

    @property
    def tokens(self) -> list[int]:
        return [e.token_id for e in self.events if isinstance(e, Token)]


def make_request(checkpoint, text: str, **params) -> tuple[EngineRequest, Listener]:
    """An engine request for `text` and its listener."""
    listener = Listener()
    return EngineRequest(checkpoint.tokenizer.encode(text), DecodeParams(**params), listener), listener


def oracle(checkpoint, text: str, **params):
    """model.generate for one text."""
    return generate(checkpoint.model, [Request(0, checkpoint.tokenizer.encode(text), DecodeParams(**params))])[0]


class Fatal(BaseException):
    """Something the engine cannot survive."""


def service_with(checkpoint, model, engine: Engine, **settings) -> Service:
    """A loaded Service whose only model is `model` run by `engine` (no background loading)."""
    service = Service(Settings(**settings))
    service.metrics = engine.metrics
    service.models = {"en-es": ModelEntry(dataclasses.replace(checkpoint, model=model), engine)}
    service.loaded = True
    return service
