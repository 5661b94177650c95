"""POST /translate: JSON or form bodies, answered as JSON or as server-sent events."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.api.answers import item_answer, reviewed, run_texts, start, with_glossary
from app.api.deps import ERRORS, Admitted, FieldsDep, ServiceDep, require, validated
from app.api.events import EventStream, event
from app.api.fields import FORM_TYPES
from app.api.glossaries import request_terms
from app.errors import ApiError, error_body
from app.glossaries.records import Terms
from app.job import Event, Job
from app.planner import Ask, Plan, plan
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


def response_body(job: Job, body: TranslateRequest, planned: Plan, service: Service) -> dict:
    """The answer of a job that ran every text (also the `done` event)."""
    answers = [with_glossary(item_answer(job, item, planned.ask), planned, i) for i, item in enumerate(job.items)]
    reviewed(answers, planned, service)
    return assemble(answers, body, job.detected)


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


async def answer(request: Request, body: TranslateRequest, planned: Plan, service: Service) -> JSONResponse:
    """The JSON answer, with timing headers and X-Cache."""
    answers, job, headers = await run_texts(request, planned, body.texts, service)
    return JSONResponse(assemble(answers, body, planned.route.detected), headers={**timing_headers(job), **headers})


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
