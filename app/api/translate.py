"""POST /translate: JSON or form bodies, answered as JSON or as server-sent events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.api.deps import DISCONNECT_CHECK_S, ERRORS, Admitted, FieldsDep, ServiceDep, require, validated
from app.api.events import EventStream, event
from app.api.fields import FORM_TYPES
from app.api.glossaries import request_terms
from app.cache import cacheable
from app.errors import ApiError, error_body
from app.glossaries.records import Terms
from app.job import Event, Item, Job
from app.planner import Ask, Plan, plan
from app.review import mark, text_confidence
from app.schemas import TranslateRequest, TranslateResponse
from app.service import Service

router = APIRouter()
BODY_SCHEMA = {"schema": {"$ref": "#/components/schemas/TranslateRequest"}}


def body_schemas() -> dict[str, dict]:
    """OpenAPI component schemas of the request body (the route reads it by hand, so FastAPI does not add them)."""
    schema = TranslateRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    return {**schema.pop("$defs", {}), "TranslateRequest": schema}


async def read_body(request: Request, data: dict) -> TranslateRequest:
    """Parse the request's fields into a TranslateRequest (400 for a missing `q` or `target`, 422 naming the field
    for other errors)."""
    require(data, "q", "target")
    if "text/event-stream" in request.headers.get("accept", "") and "stream" not in data:
        data = {**data, "stream": True}
    return validated(TranslateRequest, data)


def ask_of(body: TranslateRequest, glossary: Terms | None = None) -> Ask:
    """What a /translate body asks for, in the planner's words."""
    fmt, keep = body.format, body.preserve_placeholders
    return Ask(body.source, body.target, body.parameters, body.alternatives, fmt, keep, glossary)


def alternatives(job: Job, item: Item, n: int) -> list[str]:
    """Up to n texts from the item's n-best list, distinct from the translation and from each other."""
    seen, out = {job.texts(item)}, []
    for rank in range(1, job.params.num_hypotheses):
        text = job.texts(item, rank)
        if text not in seen and len(out) < n:
            seen.add(text)
            out.append(text)
    return out


def item_answer(job: Job, item: Item, ask: Ask) -> dict:
    """One text's translation, alternatives and details."""
    results = [u.result for u in item.units]  # none when the text is all markup
    hyps = [r.hypotheses[0] for r in results]
    reason = "length" if any(h.finish_reason == "length" for h in hyps) else "eos"
    score = sum(h.score for h in hyps) / max(len(hyps), 1) if ask.parameters.return_scores else None
    confidence = text_confidence([h.confidence for h in hyps], [len(u.ids) for u in item.units])
    details = {
        "model": job.entry.checkpoint.name,
        "input_tokens": sum(len(u.ids) for u in item.units),
        "generated_tokens": sum(len(h.tokens) for h in hyps),
        "finish_reason": reason,
        "score": score,
        "confidence": confidence,
        "queue_ms": round(max((r.queue_s for r in results), default=0.0) * 1000, 3),
        "total_ms": round(max((r.total_s for r in results), default=0.0) * 1000, 3),
        "cached": False,
    }
    if confidence is not None and len(hyps) > 1:  # a text split into sentences: each one's
        details["sentences"] = [{"text": job.unit_text(item, u), "confidence": round(h.confidence, 4)}
                                for u, h in enumerate(hyps)]  # fmt: skip
    text = job.texts(item)
    if item.layout.tagged or item.layout.fallbacks:  # inline tags: how many were not placed by alignment
        details["markup_fallbacks"] = item.fallbacks
    return {"text": text, "alternatives": alternatives(job, item, ask.alternatives), "details": details}


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


def with_glossary(answer: dict, planned: Plan, index: int) -> dict:
    """The answer with details.glossary (the entries text `index` matched, each applied or not) when one was given."""
    if planned.glossary is not None:
        answer["details"]["glossary"] = planned.glossary_report(index, answer["text"])
    return answer


def response_body(job: Job, body: TranslateRequest, planned: Plan, service: Service) -> dict:
    """The answer of a job that ran every text (also the `done` event)."""
    answers = [with_glossary(item_answer(job, item, planned.ask), planned, i) for i, item in enumerate(job.items)]
    reviewed(answers, planned, service)
    return assemble(answers, body, job.detected)


def reviewed(answers: list[dict], planned: Plan, service: Service) -> list[dict]:
    """The answers with their low-confidence sentences marked at the request's threshold (else the server's), and
    counted."""
    threshold = planned.ask.parameters.confidence_threshold
    threshold = service.settings.confidence_threshold if threshold is None else threshold
    mark(answers, threshold, service.metrics, planned.route.entry.checkpoint.name)
    return answers


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
    planned = plan(service, ask_of(body, await request_terms(service, request, fields)), body.texts)
    if body.stream:
        job = planned.job(planned.layouts, service.settings, stream=True)
        release = await start(job, service)
        return EventStream(sse(job, body, planned, service), job.abort, release)
    return await answer(request, body, planned, service)


async def start(job: Job, service: Service) -> Callable[[], None]:
    """Submit a job to its engine core, counted in flight (for draining): the count's release, for when it ends."""
    release = service.hold()
    try:
        await job.submit()
    except BaseException:
        job.abort()
        release()
        raise
    return release


async def answer(request: Request, body: TranslateRequest, planned: Plan, service: Service) -> JSONResponse:
    """The JSON answer, with timing headers and X-Cache."""
    answers, job, headers = await run_texts(request, planned, body.texts, service)
    return JSONResponse(assemble(answers, body, planned.route.detected), headers={**timing_headers(job), **headers})


async def run_texts(
    request: Request, planned: Plan, texts: list[str], service: Service
) -> tuple[list[dict], Job | None, dict[str, str]]:
    """Each planned text's answer (item_answer's shape, whatever the dialect): cached texts from the cache, the others
    from one engine job (then cached); the job (None: the cache answered all) and X-Cache (hit, miss or partial)."""
    n = len(planned.layouts)
    use_cache = service.cache.enabled and cacheable(planned.params, False)
    keys = planned.cache_keys(texts) if use_cache else []
    answers = await service.cache.get_many(keys) if use_cache else [None] * n
    misses = [i for i, a in enumerate(answers) if a is None]
    job = planned.job([planned.layouts[i] for i in misses], service.settings) if misses else None
    if job is not None:
        release = await start(job, service)
        try:
            await collect(job, request)
        finally:
            release()
        for i, item in zip(misses, job.items, strict=True):
            answers[i] = item_answer(job, item, planned.ask)
        if use_cache:
            await service.cache.put_many({keys[i]: stored(answers[i]) for i in misses})
    for i in set(range(n)) - set(misses):
        answers[i]["details"].update(queue_ms=0.0, total_ms=0.0, cached=True)
    answers = reviewed([with_glossary(a, planned, i) for i, a in enumerate(answers)], planned, service)  # cached too
    headers = {"x-cache": "miss" if len(misses) == n else "hit" if not misses else "partial"} if use_cache else {}
    return answers, job, headers


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


def token_event(job: Job, i: int, u: int, ev: Event) -> str:
    """Apply one engine event; the `token` event for the text it adds to item i ("" when none)."""
    delta = job.apply(i, u, ev)
    if not delta:
        return ""
    token = ev if isinstance(ev, int) else None
    data = {"index": i, "token": {"id": token, "text": delta}, "text": job.items[i].streamed}
    return event("token", data)


async def sse(job: Job, body: TranslateRequest, planned: Plan, service: Service) -> AsyncIterator[str]:
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
        yield event("done", response_body(job, body, planned, service))
    except ApiError as exc:
        service.metrics.failures.labels(exc.error_type).inc()
        yield event("error", error_body(exc.message, exc.error_type))
    finally:
        job.abort()
