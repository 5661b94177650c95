"""POST /translate: JSON or form bodies, answered as JSON or as server-sent events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.types import Receive, Scope, Send

from app.api.deps import DISCONNECT_CHECK_S, ERRORS, FieldsDep, ServiceDep, validated
from app.api.fields import FORM_TYPES
from app.cache import cache_key, cacheable
from app.errors import ApiError, error_body
from app.job import Event, Item, Job
from app.keys.access import Admitted
from app.languages import detect_source
from app.protect import find_spans, split_layout
from app.schemas import TranslateRequest, TranslateResponse
from app.service import ModelEntry, Service
from app.settings import Settings
from app.text import Layout, html_layout, plain_layout
from model.description import Description
from model.params import DecodeParams

router = APIRouter()
BODY_SCHEMA = {"schema": {"$ref": "#/components/schemas/TranslateRequest"}}


def body_schemas() -> dict[str, dict]:
    """OpenAPI component schemas of the request body (the route reads it by hand, so FastAPI does not add them)."""
    schema = TranslateRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    return {**schema.pop("$defs", {}), "TranslateRequest": schema}


async def read_body(request: Request, data: dict) -> TranslateRequest:
    """Parse the request's fields into a TranslateRequest (422 naming the field on error)."""
    if "text/event-stream" in request.headers.get("accept", "") and "stream" not in data:
        data = {**data, "stream": True}
    return validated(TranslateRequest, data)


def _given(value, default):
    """The request's value when it set one, else the model's default."""
    return default if value is None else value


def decode_params(body: TranslateRequest, settings: Settings, desc: Description, target: str) -> DecodeParams:
    """DecodeParams from the body over the checkpoint's defaults, enforcing the server's limits (422 naming field and
    limit)."""
    p, d = body.parameters, desc.defaults
    n = body.alternatives + 1
    default_beam = 1 if p.sampling else min(d.beam_size, settings.max_beam_size)  # sampling: no beam default
    beam = max(_given(p.beam_size, default_beam), n)
    if beam > settings.max_beam_size:
        field = "parameters.beam_size" if (p.beam_size or 0) >= n else "alternatives"
        raise ApiError(422, "validation", f"{field}: needs {beam} beams, over max_beam_size={settings.max_beam_size}")
    if p.sampling and beam > 1:
        raise ApiError(
            422, "validation", "parameters: sampling (temperature/top_k/top_p) needs beam_size=1 and alternatives=0"
        )
    limit = min(settings.max_new_tokens, desc.config.max_positions - 1)
    max_new = p.max_new_tokens or min(d.max_new_tokens or settings.default_max_new_tokens, limit)
    if max_new > limit:
        raise ApiError(422, "validation", f"parameters.max_new_tokens: {max_new} exceeds the limit of {limit}")
    min_new = _given(p.min_new_tokens, min(d.min_new_tokens, max_new))
    if min_new > max_new:
        raise ApiError(422, "validation", f"parameters.min_new_tokens: {min_new} exceeds max_new_tokens={max_new}")
    return DecodeParams(
        beam_size=beam,
        num_hypotheses=beam if n > 1 else 1,  # every beam: alternatives are picked distinct from these
        max_new_tokens=max_new,
        min_new_tokens=min_new,
        length_penalty=_given(p.length_penalty, d.length_penalty),
        repetition_penalty=_given(p.repetition_penalty, d.repetition_penalty),
        no_repeat_ngram_size=_given(p.no_repeat_ngram_size, d.no_repeat_ngram_size),
        sampling=p.sampling,
        temperature=p.temperature or 1.0,
        top_k=p.top_k or 0,
        top_p=p.top_p or 1.0,
        seed=p.seed,
        return_scores=p.return_scores,
        early_stopping=d.early_stopping,
        forced_bos_id=desc.languages.forced_bos(target),
        forced_eos=d.forced_eos,
        bad_words_ids=d.bad_words_ids,
    )


@dataclass
class Planned:
    """A checked request on its way to the engine: texts cut into units, the model, the decoding parameters."""

    entry: ModelEntry
    source: str
    layouts: list[Layout]
    params: DecodeParams
    prefix: list[int]
    detected: dict | None

    def job(self, settings: Settings, stream: bool, indices: list[int]) -> Job:
        """The engine job for the texts at these indices."""
        layouts = [self.layouts[i] for i in indices]
        return Job(self.entry, layouts, self.params, settings.max_input_tokens, stream, self.prefix, self.detected)


def plan(body: TranslateRequest, service: Service) -> Planned:
    """Check readiness, language pair and limits; detect the source for "auto"; cut texts into units."""
    s = service.settings
    service.require_ready()
    texts = [body.q] if isinstance(body.q, str) else body.q
    if not texts:
        raise ApiError(422, "validation", "q: must not be empty")
    if len(texts) > s.max_items:
        raise ApiError(422, "validation", f"q: {len(texts)} texts exceeds max_items={s.max_items}")
    for i, text in enumerate(texts):
        if not text.strip():
            raise ApiError(422, "validation", f"q[{i}]: must not be empty")
    detected = detect_source(service, texts, body.target) if body.source == "auto" else None
    source = detected["language"] if detected else body.source
    entry = service.route(source, body.target)
    ck = entry.checkpoint
    params = decode_params(body, s, ck, body.target)
    cut = html_layout if body.format == "html" else plain_layout
    layouts = [cut(t, body.parameters.split_sentences, source) for t in texts]
    keep = lambda text: find_spans(text, ck.tokenizer.spells, placeholders=body.preserve_placeholders)
    layouts = [split_layout(layout, keep) for layout in layouts]  # what the vocabulary cannot spell passes through
    return Planned(entry, source, layouts, params, ck.languages.prefix(source, body.target), detected)


def alternatives(job: Job, item: Item, n: int) -> list[str]:
    """Up to n texts from the item's n-best list, distinct from the translation and from each other."""
    seen, out = {job.texts(item)}, []
    for rank in range(1, job.params.num_hypotheses):
        text = job.texts(item, rank)
        if text not in seen and len(out) < n:
            seen.add(text)
            out.append(text)
    return out


def item_answer(job: Job, item: Item, body: TranslateRequest) -> dict:
    """One text's translation, alternatives and details."""
    results = [u.result for u in item.units]  # none when the text is all markup
    hyps = [r.hypotheses[0] for r in results]
    reason = "length" if any(h.finish_reason == "length" for h in hyps) else "eos"
    score = sum(h.score for h in hyps) / max(len(hyps), 1) if body.parameters.return_scores else None
    details = {
        "model": job.entry.checkpoint.name,
        "input_tokens": sum(len(u.ids) for u in item.units),
        "generated_tokens": sum(len(h.tokens) for h in hyps),
        "finish_reason": reason,
        "score": score,
        "queue_ms": round(max((r.queue_s for r in results), default=0.0) * 1000, 3),
        "total_ms": round(max((r.total_s for r in results), default=0.0) * 1000, 3),
        "cached": False,
    }
    return {"text": job.texts(item), "alternatives": alternatives(job, item, body.alternatives), "details": details}


def assemble(answers: list[dict], body: TranslateRequest, detected: dict | None) -> dict:
    """The response body from each text's answer (lists for a list `q`)."""
    single = isinstance(body.q, str)
    texts, alts, details = ([a[k] for a in answers] for k in ("text", "alternatives", "details"))
    out: dict = {"translatedText": texts[0] if single else texts, "details": details[0] if single else details}
    if body.alternatives:
        out["alternatives"] = alts[0] if single else alts
    if detected is not None:
        out["detectedLanguage"] = detected if single else [detected] * len(texts)
    return out


def response_body(job: Job, body: TranslateRequest) -> dict:
    """The answer of a job that ran every text (also the `done` event)."""
    return assemble([item_answer(job, item, body) for item in job.items], body, job.detected)


def timing_headers(job: Job | None) -> dict[str, str]:
    """TGI-style timing headers (milliseconds); zeros when the cache answered every text."""
    results = [u.result for item in job.items for u in item.units] if job else []
    queue = max((r.queue_s for r in results), default=0.0)
    total = max((r.total_s for r in results), default=0.0)
    generated = sum(len(r.hypotheses[0].tokens) for r in results)
    return {
        "x-queue-time": f"{queue * 1000:.1f}",
        "x-inference-time": f"{(total - queue) * 1000:.1f}",
        "x-generated-tokens": str(generated),
    }


@router.post(
    "/translate",
    response_model=TranslateResponse,
    responses=ERRORS,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {ctype: BODY_SCHEMA for ctype in ("application/json", *FORM_TYPES)},
        }
    },
)
async def translate(request: Request, service: ServiceDep, fields: FieldsDep, _: Admitted):
    """Translate `q` from `source` to `target`; `stream` answers with server-sent events."""
    body = await read_body(request, fields)
    planned = plan(body, service)
    if body.stream:
        job = planned.job(service.settings, True, list(range(len(planned.layouts))))
        await start(job, service)
        return JobStream(sse(job, body, service), job, service)
    return await answer(request, body, planned, service)


async def start(job: Job, service: Service) -> None:
    """Submit a job to its engine core, counted in flight (for draining) until it ends."""
    service.inflight += 1
    try:
        await job.submit()
    except BaseException:
        job.abort()
        service.inflight -= 1
        raise


async def answer(request: Request, body: TranslateRequest, planned: Planned, service: Service) -> JSONResponse:
    """The JSON answer: cached texts from the cache, the others from the engine (then cached); X-Cache says which."""
    n = len(planned.layouts)
    use_cache = service.cache.enabled and cacheable(planned.params, False)
    keys = cache_keys(body, planned) if use_cache else []
    answers = await service.cache.get_many(keys) if use_cache else [None] * n
    misses = [i for i, a in enumerate(answers) if a is None]
    job = planned.job(service.settings, False, misses) if misses else None
    if job is not None:
        await start(job, service)
        try:
            await collect(job, request)
        finally:
            service.inflight -= 1
        for i, item in zip(misses, job.items, strict=True):
            answers[i] = item_answer(job, item, body)
        if use_cache:
            await service.cache.put_many({keys[i]: stored(answers[i]) for i in misses})
    for i in set(range(n)) - set(misses):
        answers[i]["details"].update(queue_ms=0.0, total_ms=0.0, cached=True)
    headers = timing_headers(job)
    if use_cache:
        headers["x-cache"] = "miss" if len(misses) == n else "hit" if not misses else "partial"
    return JSONResponse(assemble(answers, body, planned.detected), headers=headers)


def cache_keys(body: TranslateRequest, planned: Planned) -> list[str]:
    """Each text's cache key."""
    card = planned.entry.card
    texts = [body.q] if isinstance(body.q, str) else body.q
    options = {
        "format": body.format,
        "split": body.parameters.split_sentences,
        "alternatives": body.alternatives,
        "placeholders": body.preserve_placeholders,
    }
    return [cache_key(card.name, card.version, planned.source, body.target, options, planned.params, t) for t in texts]


def stored(answer: dict) -> dict:
    """An answer as the cache keeps it: without this request's timings."""
    details = {k: v for k, v in answer["details"].items() if k not in ("queue_ms", "total_ms", "cached")}
    return {**answer, "details": details}


async def collect(job: Job, request: Request) -> None:
    """Wait for every unit; abort if the client goes away (checked even while tokens flow) or a unit fails."""

    async def client_gone() -> None:
        if await request.is_disconnected():
            raise ApiError(499, "client_closed", "client disconnected")

    await job.wait_all(check=client_gone, every=DISCONNECT_CHECK_S)


class JobStream(StreamingResponse):
    """The event stream of a job, released however the response ends (even when it never started)."""

    def __init__(self, events: AsyncIterator[str], job: Job, service: Service):
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        super().__init__(events, media_type="text/event-stream", headers=headers)
        self.job, self.service = job, service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.job.abort()
            self.service.inflight -= 1


def event(name: str, data: dict) -> str:
    """One server-sent event."""
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def token_event(job: Job, i: int, u: int, ev: Event) -> str:
    """Apply one engine event; the `token` event for the text it adds to item i ("" when none)."""
    delta = job.apply(i, u, ev)
    if not delta:
        return ""
    token = ev if isinstance(ev, int) else None
    data = {"index": i, "token": {"id": token, "text": delta}, "text": job.items[i].streamed}
    return event("token", data)


async def sse(job: Job, body: TranslateRequest, service: Service) -> AsyncIterator[str]:
    """Token events in layout order per item, then `done`; `error` on failure; keep-alives in silence. Events that
    queued up while the client was being served go out together, in one write."""
    keepalive = service.settings.keepalive_seconds
    try:
        for i, delta in job.start():
            yield event("token", {"index": i, "token": {"id": None, "text": delta}, "text": delta})
        while not job.finished:
            try:
                chunk = [token_event(job, *await job.next_event(keepalive))]
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            while not job.queue.empty():
                chunk.append(token_event(job, *job.queue.get_nowait()))
            if text := "".join(chunk):
                yield text
        yield event("done", response_body(job, body))
    except ApiError as exc:
        service.metrics.failures.labels(exc.error_type).inc()
        yield event("error", error_body(exc.message, exc.error_type))
    finally:
        job.abort()
