"""The engine: one thread owns a model and runs plan -> prefill -> decode step -> emit, forever."""

from __future__ import annotations

import logging
import threading
import time

import torch

from app.engine.request import EngineRequest, Failed, Finished, Status, Token
from app.engine.scheduler import Limits, Scheduler
from app.metrics import Metrics
from model.batch import DecodeBatch
from model.search import Request, StepOutput
from model.transformer import Seq2SeqTransformer

log = logging.getLogger("mt.engine")


class Overloaded(Exception):
    """The waiting queue is full."""


class Engine:
    """Continuous batching over one model: requests join between steps and leave as soon as they finish."""

    def __init__(
        self, name: str, model: Seq2SeqTransformer, limits: Limits, metrics: Metrics, max_queue: int, max_wait_ms: float
    ):
        self.name, self.model, self.metrics = name, model, metrics
        self.scheduler = Scheduler(limits)
        self.max_queue, self.max_wait = max_queue, max_wait_ms / 1000
        self.cv = threading.Condition()
        self.running: dict[int, EngineRequest] = {}
        self.batch: DecodeBatch | None = None
        self.reserved = 0  # cache tokens reserved by running requests
        self.cache_tokens = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name=f"engine-{name}", daemon=True)
        metrics.add_model(name)

    # --- called from other threads -------------------------------------------------------------
    def start(self) -> None:
        """Start the engine thread."""
        self.thread.start()

    @property
    def alive(self) -> bool:
        """True while the engine thread runs."""
        return self.thread.is_alive()

    def submit(self, *requests: EngineRequest) -> None:
        """Queue requests together (one job's units), or none: Overloaded at once when the queue is full."""
        with self.cv:
            if len(self.scheduler.waiting) >= self.max_queue:
                raise Overloaded(f"queue full ({self.max_queue} waiting)")
            for request in requests:
                self.scheduler.add(request)
            self.metrics.waiting.inc(len(requests))
            self.cv.notify()

    def abort(self, request: EngineRequest) -> None:
        """Ask for a request to stop; its rows leave the batch before the next step."""
        with self.cv:
            request.aborted = True
            self.cv.notify()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread after the current step."""
        with self.cv:
            self.stopping = True
            self.cv.notify()
        if self.thread.is_alive():
            self.thread.join(timeout)

    @property
    def load(self) -> tuple[int, int]:
        """(waiting, running) requests."""
        return len(self.scheduler.waiting), len(self.running)

    # --- the engine thread ----------------------------------------------------------------------
    def _run(self) -> None:
        """Loop until stopped; if anything escapes, fail every request so none is silently lost."""
        try:
            with torch.inference_mode():
                while self._iterate():
                    pass
        except BaseException:
            log.exception("engine %s died", self.name)
            raise
        finally:
            self._fail_all("the engine stopped")

    def _iterate(self) -> bool:
        """One scheduling round: plan, drop aborted, prefill, step. False once stopped."""
        with self.cv:
            while not self.stopping and not self.scheduler.waiting and not self.running:
                self.cv.wait()
            if self.stopping:
                return False
            self._gather_when_idle()
            rows = self.batch.rows if self.batch else 0
            plan = self.scheduler.plan(rows, self.reserved)
        for req in plan.drop:
            self.metrics.waiting.dec()
            self._finish(req, Finished([], "aborted", 0.0, time.perf_counter() - req.arrival))
        self._drop_aborted()
        if plan.admit:
            self._prefill(plan.admit)
        if self.batch is not None and len(self.batch):
            self._step()
        self._report_cache()
        return True

    def _gather_when_idle(self) -> None:
        """With nothing running, wait up to max_wait after the oldest arrival so arrivals batch together."""
        if self.running or not self.scheduler.waiting:
            return
        deadline = self.scheduler.waiting[0].arrival + self.max_wait
        while not self.stopping and len(self.scheduler.waiting) < self.scheduler.limits.max_batch_size:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                break
            self.cv.wait(remaining)

    def _drop_aborted(self) -> None:
        """Aborted running requests leave the batch now."""
        gone = [r for r in self.running.values() if r.aborted]
        if not gone:
            return
        keep = [rid for rid, r in self.running.items() if not r.aborted]
        self.batch = self.batch.filter(keep) if self.batch is not None else None
        for req in gone:
            self._finish(req, Finished([], "aborted", self._queue_s(req), time.perf_counter() - req.arrival))

    def _prefill(self, admit: list[EngineRequest]) -> None:
        """Encode admitted requests together; if that fails, one by one so only the culprit fails."""
        now = time.perf_counter()
        for req in admit:
            req.admitted, req.status = now, Status.RUNNING
            self.metrics.waiting.dec()
            self.metrics.running.inc()
            self.metrics.queue_time.observe(now - req.arrival)
            self.running[req.id] = req
            self.reserved += req.reserved_tokens
        t0 = time.perf_counter()
        try:
            new = DecodeBatch.prefill(self.model, [Request(r.id, r.src, r.params) for r in admit])
        except Exception as exc:
            if len(admit) > 1:
                for req in admit:
                    self._prefill_one(req)
                return
            self._finish(admit[0], Failed(f"encoding failed: {exc}"))
            return
        self.metrics.step.labels("encode").observe(time.perf_counter() - t0)
        self.batch = new if self.batch is None else self.batch.concat(new)

    def _prefill_one(self, req: EngineRequest) -> None:
        """Encode a single request (fault isolation)."""
        try:
            new = DecodeBatch.prefill(self.model, [Request(req.id, req.src, req.params)])
        except Exception as exc:
            self._finish(req, Failed(f"encoding failed: {exc}"))
            return
        self.batch = new if self.batch is None else self.batch.concat(new)

    def _step(self) -> None:
        """One decode step for the whole batch, then events for every request in it."""
        t0 = time.perf_counter()
        rows = self.batch.rows
        try:
            self.batch, outputs = self.batch.step(self.model)
        except Exception as exc:
            log.exception("decode step failed")
            for req in list(self.running.values()):
                self._finish(req, Failed(f"decoding failed: {exc}"))
            self.batch = None
            return
        now = time.perf_counter()
        self.metrics.step.labels("decode").observe(now - t0)
        self.metrics.batch_size.observe(rows)
        for out in outputs:
            self._deliver(self.running[out.id], out, now)

    def _deliver(self, req: EngineRequest, out: StepOutput, now: float) -> None:
        """Emit a token and/or the final result of one request."""
        eos = self.model.cfg.eos_id
        if out.token is not None and out.token != eos:
            self._observe_token(req, now)
            self._emit(req, Token(out.token))
        if out.finished:
            if req.last_token is None:
                self._observe_token(req, now)  # beams: the first output arrives with the result
            best = out.hypotheses[0]
            self._finish(req, Finished(out.hypotheses, best.finish_reason, self._queue_s(req), now - req.arrival))

    def _observe_token(self, req: EngineRequest, now: float) -> None:
        """Time to first token or inter-token latency."""
        if req.last_token is None:
            self.metrics.ttft.observe(now - req.arrival)
        else:
            self.metrics.itl.observe(now - req.last_token)
        req.last_token = now

    @staticmethod
    def _queue_s(req: EngineRequest) -> float:
        """Seconds the request waited for admission."""
        return (req.admitted or time.perf_counter()) - req.arrival

    def _finish(self, req: EngineRequest, event: Finished | Failed) -> None:
        """Deliver the last event, release the request's budget and count it."""
        if self.running.pop(req.id, None) is not None:
            self.metrics.running.dec()
            self.reserved -= req.reserved_tokens
        req.status = Status.FINISHED
        if isinstance(event, Finished):  # failures are counted once, where the HTTP error is answered
            generated = len(event.hypotheses[0].tokens) if event.hypotheses else 0
            self.metrics.requests.labels(self.name, event.finish_reason).inc()
            self.metrics.duration.observe(event.total_s)
            self.metrics.input_tokens.observe(len(req.src))
            self.metrics.generated.observe(generated)
            self.metrics.input_total.inc(len(req.src))
            self.metrics.generated_total.inc(generated)
        self._emit(req, event)

    @staticmethod
    def _emit(req: EngineRequest, event: Token | Finished | Failed) -> None:
        """Hand an event to the request's listener; a closed listener must not take the engine down."""
        try:
            req.emit(event)
        except Exception:
            log.exception("could not deliver an event")

    def _report_cache(self) -> None:
        """Keep mt_cache_tokens equal to the tokens this engine's cache holds (engines add up)."""
        tokens = self.batch.cache_tokens() if self.batch is not None else 0  # python arithmetic: no device sync
        self.metrics.cache_tokens.inc(tokens - self.cache_tokens)
        self.cache_tokens = tokens
        if self.batch is not None and not len(self.batch):
            self.batch = None

    def _fail_all(self, message: str) -> None:
        """Fail everything still queued or running (engine shutdown or death)."""
        with self.cv:
            waiting = list(self.scheduler.waiting)
            self.scheduler.waiting.clear()
        for req in waiting:
            self.metrics.waiting.dec()
            self._finish(req, Failed(message, "not_ready"))
        for req in list(self.running.values()):
            self._finish(req, Failed(message, "not_ready"))
        self.batch = None
