"""The engine core: continuous batching over one model, driven by messages. It plans, executes (every batch change
guarded) and collects one Update per front per round; it knows token ids only, never text, sockets or HTTP. With
`overlap`, each round launches the next decode step before reading the previous one back (the `DecodeLoop` keeps it
in flight), so the host's bookkeeping and messages run while the device decodes."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from typing import TypeVar

import torch

from app.engine.messages import Hyp, Result, Submit, Update
from app.engine.request import EngineRequest, Status
from app.engine.scheduler import Limits, Scheduler
from app.metrics import Metrics, Tally
from model.confidence import Scorer
from model.runner import Runner, agreement, unfinished
from model.runner.align import alignments
from model.runner.constraints import Words
from model.runner.fallback import redo
from model.runner.loop import DecodeLoop
from model.runner.own_words import own_words
from model.runner.params import DecodeParams, Probe
from model.runner.search import Hypothesis, Request, StepOutput
from model.runner.state import Encoded

log = logging.getLogger("mt.engine")
T = TypeVar("T")
PUBLISH_S = 0.25  # while only decode steps happen, their metrics and the cache gauge reach Prometheus this often
MAX_RETRIES = 8  # decodes again per request to mend glossary terms (one occurrence each): a bound, never a loop


class EngineCore:
    """Requests join the batch between steps and leave as soon as they finish; a failed batch operation fails the
    requests it touched and the core goes on. With `overlap`, one decode step stays in flight (greedy, sampled and
    beam rows alike): a round's outputs are the previous step's, and what joins or leaves between rounds does so
    between launches."""

    def __init__(
        self,
        name: str,
        model: Runner,
        limits: Limits,
        metrics: Metrics,
        max_queue: int,
        max_wait_ms: float,
        overlap: bool = False,
        words: Words | None = None,
        scorer: Scorer | None = None,
    ):
        self.name, self.model, self.metrics = name, model, metrics
        self.scorer = scorer  # the model's confidence (None: outputs carry none)
        self.scheduler = Scheduler(limits)
        self.max_queue, self.max_wait = max_queue, max_wait_ms / 1000
        self.requests: dict[tuple[bytes, int], EngineRequest] = {}  # waiting and running, by key
        self.running: dict[tuple[bytes, int], EngineRequest] = {}
        self.loop = DecodeLoop(model, overlap, words)  # the running batch and the decode step in flight
        self.starts = words.starts.tolist() if words is not None else None  # target tokens that start a word
        self.joins = words.joins.tolist() if words is not None else None  # and those that continue one
        self.vocab = unfinished.Pieces.of(words) if words is not None else None  # their text, for stand-ins
        self.reserved = 0  # cache tokens reserved by running requests
        self.probes: dict[Hashable, object] = {}  # glossary terms' probes of the model, most recent last
        self.outbox: dict[bytes, Update] = {}
        self.last_step = 0.0  # when the previous decode step's tokens came out
        metrics.add_model(name)
        self.encode_time = metrics.step.labels("encode")
        self.decode_time, self.batch_size = Tally(metrics.step.labels("decode")), Tally(metrics.batch_size)
        self.itl = Tally(metrics.itl)
        self.published = float("-inf")  # when the step metrics and gauges last reached Prometheus
        self.shown: tuple[int, int] | None = None  # the (waiting, running) they showed

    # --- input -----------------------------------------------------------------------------------
    def submit(self, front: bytes, job: Submit) -> None:
        """Queue a job's units together, or refuse the whole job when the queue is full."""
        box = self._box(front)
        if len(self.scheduler.waiting) >= self.max_queue:
            box.refused.append((job.job, f"queue full ({self.max_queue} waiting)"))
            return
        for unit in job.units:
            params = job.unit_params(unit)  # a revisable one streams whole, with its result (`DecodeParams.revisable`)
            req = EngineRequest(unit.src, params, unit.id, front, job.stream and not params.revisable, job.arrival)
            self.requests[req.key] = req
            self.scheduler.add(req)
        box.accepted.append(job.job)

    def abort(self, front: bytes, ids: list[int]) -> None:
        """Mark requests to stop: waiting ones are dropped at the next plan, running ones leave before the step."""
        for i in ids:
            if (req := self.requests.get((front, i))) is not None:
                req.aborted = True

    def wait_s(self) -> float | None:
        """Seconds until a round is due: 0 now, None when there is nothing to do. While idle, arrivals are gathered
        for up to max_wait after the oldest one, so that they start as one batch."""
        waiting = self.scheduler.waiting
        if self.running or len(waiting) >= self.scheduler.limits.max_batch_size:
            return 0.0
        if not waiting:
            return None
        return max(0.0, waiting[0].arrival + self.max_wait - time.monotonic())

    @property
    def load(self) -> tuple[int, int]:
        """(waiting, running) requests."""
        return len(self.scheduler.waiting), len(self.running)

    # --- one round -------------------------------------------------------------------------------
    @torch.inference_mode()
    def run_round(self) -> None:
        """Plan admissions, then execute: aborted rows leave, admitted ones are encoded and join, one decode step."""
        plan = self.scheduler.plan(len(self.running), self.loop.rows, self.reserved)
        for req in plan.drop:
            self._finish(req, None, time.monotonic())
        self._drop_aborted()
        if plan.admit:
            self._admit(plan.admit)
        if self.loop:
            self._step()
        if not self.loop:
            self.loop.clear()

    def flush(self) -> dict[bytes, Update]:
        """This round's messages, one per front that has news. The metrics follow when the load changes or a result
        goes out, else every PUBLISH_S: each Prometheus write goes to a shared file, and a lone request's decode steps
        change nothing but the step metrics and the cache gauge."""
        out, self.outbox = self.outbox, {}
        waiting, running = self.load
        for update in out.values():
            update.waiting, update.running = waiting, running
        now = time.monotonic()
        results = any(update.results for update in out.values())
        if results or (waiting, running) != self.shown or now - self.published >= PUBLISH_S:
            self._publish(waiting, running, now)
        return out

    def _publish(self, waiting: int, running: int, now: float) -> None:
        """The step metrics gathered since the last time, and the gauges, to Prometheus."""
        for tally in (self.decode_time, self.batch_size, self.itl):
            tally.push()
        m = self.metrics
        m.waiting.set(waiting)
        m.running.set(running)
        m.cache_tokens.set(self.loop.cache_tokens())  # python arithmetic, no sync
        self.published, self.shown = now, (waiting, running)

    def fail_all(self, message: str) -> None:
        """Fail everything queued or running (the core stops)."""
        for req in list(self.requests.values()):
            self._fail(req, message, "not_ready")
        self.scheduler.waiting.clear()
        self.loop.clear()

    # --- execute, guarded ------------------------------------------------------------------------
    def _guarded(self, what: str, op: Callable[[], T]) -> T | None:
        """op(), a change of the running batch; when it raises, None after failing every request of the batch (it
        touched them all) and clearing it."""
        ids = self.loop.ids
        try:
            return op()
        except Exception as exc:
            log.exception("%s failed", what)
            for key in ids:
                if (req := self.running.get(key)) is not None:
                    self._fail(req, f"{what} failed: {exc}")
            self.loop.clear()
            return None

    def _drop_aborted(self) -> None:
        """Aborted running requests leave the batch now."""
        gone = [r for r in self.running.values() if r.aborted]
        if not gone:
            return
        now = time.monotonic()
        for req in gone:
            self._finish(req, None, now)
        self._guarded("filter", lambda: self.loop.retain(list(self.running)))

    def _admit(self, admit: list[EngineRequest]) -> None:
        """Admitted requests run: encode them, then join the batch."""
        now = time.monotonic()
        for req in admit:
            req.admitted, req.status = now, Status.RUNNING
            self.metrics.queue_time.observe(now - req.arrival)
            self.running[req.key] = req
            self.reserved += req.reserved_tokens
        t0 = time.perf_counter()
        for new in self._prefill(admit):
            self._join(new)
        self.scheduler.joined(time.perf_counter() - t0)

    def _prefill(self, admit: list[EngineRequest]) -> list[Encoded]:
        """Encode admitted requests together; if that fails, one by one so that only the culprit fails."""
        t0 = time.perf_counter()
        try:
            new = self.loop.prefill([Request(r.key, r.src, r.params) for r in admit])
        except Exception as exc:
            if len(admit) > 1:
                return [b for req in admit for b in self._prefill([req])]
            self._fail(admit[0], f"encoding failed: {exc}")
            return []
        self.encode_time.observe(time.perf_counter() - t0)
        return [new]

    def _join(self, new: Encoded) -> None:
        """New rows join the batch. If that fails they fail, and the batch goes on without them when it can."""
        old = self.loop.ids
        try:
            self.loop.join(new)
        except Exception as exc:
            log.exception("joining the batch failed")
            for key in new.ids + (old if not self.loop else []):  # the loop is cleared when restoring failed too
                if (req := self.running.get(key)) is not None:
                    self._fail(req, f"joining the batch failed: {exc}")

    def _step(self) -> None:
        """One decode step for the whole batch, then tokens and results for every request in it (with overlap: the
        next step is launched, then the one in flight is read back and its tokens and results go out)."""
        rows, t0 = self.loop.rows, time.perf_counter()
        outputs = self._guarded("decoding", self.loop.step)
        if outputs is None:
            return
        now, seconds = time.monotonic(), time.perf_counter() - t0
        self.decode_time.observe(seconds)
        self.scheduler.stepped(seconds)
        self.batch_size.observe(rows)
        self._collect(outputs, now)

    def _collect(self, outputs: list[StepOutput], now: float) -> None:
        """Tokens for streaming requests (a beam request's stable ones, perhaps several), results for finished ones;
        TTFT per request, ITL once per step for one-row requests (beams output in bursts)."""
        eos, continued = self.model.cfg.eos_id, 0
        for out in outputs:
            req = self.running[out.id]
            if tokens := out.streamed(eos):
                if req.last_token is None:
                    req.last_token = now
                    self.metrics.ttft.observe(now - req.arrival)
                elif out.token is not None:
                    continued += 1
                if req.stream:
                    box = self._box(req.front)
                    box.ids += [req.id] * len(tokens)
                    box.tokens += tokens
            if out.finished:
                if req.last_token is None:  # beams that never had a stable token: the first output is the result
                    self.metrics.ttft.observe(now - req.arrival)
                self._finish(req, out.hypotheses, now)
        self.itl.observe(now - self.last_step, continued)  # rows with a token last step too
        self.last_step = now

    # --- endings ---------------------------------------------------------------------------------
    def _release(self, req: EngineRequest) -> None:
        """Forget the request and give back its cache budget."""
        self.requests.pop(req.key, None)
        if self.running.pop(req.key, None) is not None:
            self.reserved -= req.reserved_tokens
        req.status = Status.FINISHED

    def _finish(self, req: EngineRequest, hyps: list[Hypothesis] | None, now: float) -> None:
        """Count a finished request and send its result (aborted ones, hyps None, are only counted); one whose output
        misses a placed glossary term is decoded once more with it forced where its source aligns (a stream gets such a
        request whole: `DecodeParams.revisable`)."""
        self._release(req)
        if hyps and req.params.stand_in:  # a term in place of the model's own word (`model.runner.unfinished`)
            hyps, req.params = unfinished.stand(hyps, req.params, self.vocab, self._likely(req.src), self._forms)
        if hyps and self._retried(req, hyps[0]):
            return
        self.loop.runner.forget(req.src)  # done: its source's memory is no longer kept
        queue_s, total_s = (req.admitted or now) - req.arrival, now - req.arrival
        generated = len(hyps[0].tokens) if hyps else 0
        m = self.metrics
        m.requests.labels(self.name, hyps[0].finish_reason if hyps else "aborted").inc()
        m.duration.observe(total_s)
        m.input_tokens.observe(len(req.src))
        m.generated.observe(generated)
        m.input_total.inc(len(req.src))
        m.generated_total.inc(generated)
        if hyps is not None:
            places = alignments(self.loop.runner, [(req.src, h.tokens) for h in hyps]) if req.params.align else None
            best = [Hyp(list(h.tokens), h.score, h.finish_reason, places[i] if places else [])
                    for i, h in enumerate(hyps)]  # fmt: skip
            if hyps and req.params.confidence and self.scorer is not None:
                rated = own_words(hyps[0], req.params) if req.params.constraints else hyps[0]
                best[0].confidence = self.scorer(rated, req.params, req.src)
            self._box(req.front).results.append(Result(req.id, best, queue_s, total_s))

    def _retried(self, req: EngineRequest, best: Hypothesis) -> bool:
        """Whether the request is queued again to mend its output where it first needs it (each mend forces the
        output up to there, so the words before it stay): a term made to agree with the word before it
        (`model.runner.agreement`), a term the model reads as the start of a longer word put in place of its own word
        (`model.runner.unfinished`), or a missing glossary term forced (`model.runner.fallback`)."""
        if not req.params.revisable or self.starts is None or req.retries >= MAX_RETRIES:
            return False
        runner, src, params, tokens = self.loop.runner, req.src, req.params, best.tokens
        likely = self._likely(src)
        alone = lambda s, t: self._probed((s, t), lambda: unfinished.alone(runner, s, t, self.vocab))  # noqa: E731
        word = lambda k: self._own_word(src, params, k)  # noqa: E731
        spell = self.vocab.spelled if self.vocab is not None else None
        mends = [
            ("agreement", agreement.redo(params, tokens, self._forms, likely)),
            ("unfinished", unfinished.redo(runner, src, params, tokens, self.vocab, alone, word)),
            ("placed", redo(runner, self.starts, src, params, tokens, self.joins, likely, spell)),
        ]
        mends = [(reason, p) for reason, p in mends if p is not None]
        if not mends:
            return False
        reason, params = min(mends, key=lambda m: departs(m[1].prefix, tokens))  # the first place; ties: this order
        self.metrics.glossary_retries.labels(self.name, reason).inc()
        again = EngineRequest(req.src, params, req.id, req.front, req.stream, req.arrival, retries=req.retries + 1)
        self.requests[again.key] = again
        self.scheduler.add(again)
        return True

    def _likely(self, src: list[int]) -> Callable[[list[tuple[int, ...]]], list[float]]:
        """Outputs' log-probabilities for the source `src`, teacher-forced (`agreement.likelihoods`)."""
        return lambda outs: agreement.likelihoods(self.loop.runner, [(tuple(src), o) for o in outs])

    def _own_word(self, src: list[int], params: DecodeParams, k: int) -> tuple[int, ...]:
        """The model's own word for constraint k's source words (`unfinished.own_word`), cached by those words (one
        target may stand for several: "bike", "bicycle" -> "bici"): a term placed by a prefix has no source span left,
        the words its first occurrence in this source had serve."""
        term, span = params.constraints[k], params.constraint_spans[k]
        if span[1] < 0:
            own = self.probes.get(("own source", term, tuple(src)))
            return () if own is None else self.probes.get(("own", own), ())
        own = unfinished.own_source(src, span, params.source_prefix)
        self._probed(("own source", term, tuple(src)), lambda: own)  # the first occurrence's, for a later retry
        return self._probed(("own", own), lambda: unfinished.own_word(self.loop.runner, own, self.vocab))

    def _forms(self, probe: Probe) -> list[float]:
        """A glossary term's form scores (`agreement.probe`), cached."""
        return self._probed(probe, lambda: agreement.probe(self.loop.runner, probe))

    def _probed(self, key: Hashable, ask: Callable[[], T]) -> T:
        """A probe of the model about a glossary term, cached (glossaries repeat their terms): the last 4,096."""
        if key not in self.probes:
            self.probes[key] = ask()
            if len(self.probes) > 4096:
                del self.probes[next(iter(self.probes))]
        return self.probes[key]

    def _fail(self, req: EngineRequest, message: str, error_type: str = "generation") -> None:
        """Send a request its error (failures are counted once, by the front that answers them)."""
        self._release(req)
        self.loop.runner.forget(req.src)
        now = time.monotonic()
        queue_s = (req.admitted or now) - req.arrival
        self._box(req.front).results.append(Result(req.id, [], queue_s, now - req.arrival, message, error_type))

    def _box(self, front: bytes) -> Update:
        """This round's Update for a front."""
        box = self.outbox.get(front)
        if box is None:
            box = self.outbox[front] = Update()
        return box


def departs(prefix: tuple[int, ...], tokens: list[int]) -> int:
    """Where a mend's forced `prefix` leaves the output `tokens` (their common start's length)."""
    return next(
        (i for i, (a, b) in enumerate(zip(prefix, tokens, strict=False)) if a != b), min(len(prefix), len(tokens))
    )
