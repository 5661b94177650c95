"""POST /translate_file and GET /download_file/{name}: LibreTranslate's document translation, one job per file."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import UploadFile

from app.api.deps import DISCONNECT_CHECK_S, ERRORS, ServiceDep, validated
from app.api.events import EventStream, event
from app.api.glossaries import request_terms
from app.documents import Document
from app.documents.formats import FORMATS, extension, open_document
from app.documents.pipeline import Rounds, check_limits, translate_document
from app.documents.store import FileStore, safe_filename
from app.errors import ApiError, error_body
from app.planner import Ask, plan_route
from app.service import Service

router = APIRouter()
DETECT_CHARS = 2000  # source "auto": the language of the file's first characters


class FileRequest(BaseModel):
    """The multipart fields besides `file`."""

    model_config = ConfigDict(extra="ignore")

    source: str = Field("auto", min_length=1, max_length=16)
    target: str = Field(min_length=1, max_length=16)
    api_key: str | None = None
    direct: bool = Field(False, description="answer with the translated file itself instead of a download URL")
    glossary_id: str | None = Field(None, description="a stored glossary of this language pair, on every segment")
    glossary: str | None = Field(None, description="inline entries: TSV text, or a JSON object or list of pairs")
    confidence_threshold: float | None = Field(
        None, ge=0, le=1, description="below it a segment is marked for review (.po fuzzy, XLIFF "
        "needs-review-translation); default: the server's confidence_threshold"
    )  # fmt: skip


def store(service: Service) -> FileStore:
    """The service's store of translated files (made on first use; its outages count in the service's metrics)."""
    if service.documents is None:
        s = service.settings
        service.documents = FileStore(s.files_dir, s.file_ttl_seconds, service.metrics, s.store_timeout_seconds)
    return service.documents


async def read_upload(request: Request, service: Service) -> tuple[FileRequest, str, bytes]:
    """The fields, the file name and its bytes (422 naming the field; 413 naming max_file_bytes)."""
    limit = service.settings.max_file_bytes
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise ApiError(415, "unsupported_media_type", "content-type: send multipart/form-data with a `file` field")
    form = await request.form()
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise ApiError(422, "validation", "file: a multipart file field named `file` is required")
    data = await upload.read(limit + 1)
    if len(data) > limit:
        raise ApiError(413, "payload_too_large", f"file: over max_file_bytes={limit}")
    fields = validated(FileRequest, {k: v for k, v in form.items() if k != "file"})
    return fields, upload.filename or "", data


def wants(request: Request, media_type: str) -> bool:
    """Whether the client's Accept header names a media type."""
    return media_type in request.headers.get("accept", "")


FILE_FORM = {
    "type": "object",
    "required": ["file", "target"],
    "properties": {
        "file": {"type": "string", "format": "binary"},
        "source": {"type": "string", "default": "auto"},
        "target": {"type": "string"},
        "api_key": {"type": "string"},
        "direct": {"type": "boolean", "default": False},
        "glossary_id": {"type": "string"},
        "glossary": {"type": "string"},
        "confidence_threshold": {"type": "number", "minimum": 0, "maximum": 1},
    },
}


@router.post(
    "/translate_file",
    responses=ERRORS,
    openapi_extra={"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": FILE_FORM}}}},
)
async def translate_file(request: Request, service: ServiceDep):
    """Translate an uploaded file (multipart `file`, `source`, `target`, `api_key`, `glossary_id`, `glossary`);
    answer `translatedFileUrl`, the file itself (`direct=true` or `Accept: application/octet-stream`), or progress
    events (`text/event-stream`)."""
    fields, filename, data = await read_upload(request, service)
    s = service.settings
    client = request.client.host if request.client else "unknown"
    await service.limiter.limits_for(fields.api_key, client)  # a missing or invalid key is refused before parsing
    service.require_ready()
    direct = fields.direct or wants(request, "application/octet-stream")
    if not direct:
        store(service).ready()  # 507/503 before translating a file that could not be stored
    doc, media_type = await asyncio.to_thread(open_document, filename, data, s, fields.target)
    check_limits(doc, s)
    await service.limiter.admit(fields.api_key, client, ["".join(seg.text for seg in doc.segments)])
    sample = " ".join(seg.text for seg in doc.segments)[:DETECT_CHARS] or "-"
    terms = await request_terms(service, request, fields.model_dump())
    planned = plan_route(service, Ask(fields.source, fields.target, glossary=terms), [sample])
    rounds = Rounds(planned, s, fields.confidence_threshold)
    job = FileJob(fields, filename, doc, rounds, direct)
    task = asyncio.create_task(job.finish(service, str(request.base_url)))
    if wants(request, "text/event-stream") and not direct:
        return EventStream(progress(task, rounds, service), task.cancel, service.hold())
    with service.in_flight():
        result = await watch(task, request)
    if direct:
        disposition = f'attachment; filename="{safe_filename(filename)}"'
        return Response(result["file"], media_type=media_type, headers={"Content-Disposition": disposition})
    return JSONResponse(result)


@dataclass
class FileJob:
    """An uploaded file, opened and routed to a model."""

    fields: FileRequest
    filename: str
    doc: Document
    rounds: Rounds
    direct: bool

    async def finish(self, service: Service, base_url: str) -> dict:
        """Translate the document and save it: the file's bytes (direct) or the LibreTranslate answer."""
        flagged = await translate_document(self.doc, self.rounds)
        out = await asyncio.to_thread(self.doc.save)
        segments = len(self.doc.segments)
        route = self.rounds.plan.route
        details = {"model": route.entry.checkpoint.name, "segments": segments, "flagged": flagged}
        if self.rounds.rated:  # sentences translated with a confidence, and those below the threshold
            r = self.rounds
            details["confidence"] = {"threshold": r.threshold, "sentences": r.rated, "low": r.low}
            service.metrics.confidence_sentences.labels(details["model"]).inc(r.rated)
            service.metrics.low_confidence.labels(details["model"]).inc(r.low)
        if self.rounds.plan.glossary is not None:
            details["glossary"] = self.rounds.glossary_report()
        if self.direct:
            return {"file": out, "details": details}
        name = await store(service).save(out, self.filename, self.fields.api_key)
        answer = {"translatedFileUrl": f"{base_url}download_file/{name}", "details": details}
        if route.detected is not None:
            answer["detectedLanguage"] = route.detected
        return answer


async def watch(task: asyncio.Task, request: Request) -> dict:
    """The task's result; cancelled (and its engine work aborted) when the client goes away."""
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=DISCONNECT_CHECK_S)
            if not task.done() and await request.is_disconnected():
                raise ApiError(499, "client_closed", "client disconnected")
        return task.result()
    finally:
        task.cancel()


async def progress(task: asyncio.Task, rounds: Rounds, service: Service) -> AsyncIterator[str]:
    """`progress` events (units done of those sent so far) while the file is translated, then `done` with the
    answer, or `error`."""
    try:
        while not task.done():
            rounds.changed.clear()
            yield event("progress", {"done": rounds.done, "total": rounds.total})
            waiter = asyncio.ensure_future(rounds.changed.wait())
            await asyncio.wait({task, waiter}, timeout=service.settings.keepalive_seconds)
            waiter.cancel()
        yield event("done", task.result())
    except ApiError as exc:
        yield event("error", error_body(exc.message, exc.error_type))


@router.get("/download_file/{name}", responses=ERRORS)
async def download_file(name: str, service: ServiceDep, api_key: str | None = None):
    """A translated file, until it expires; only to the API key that uploaded it (or to a request naming none)."""
    data = await asyncio.to_thread(store(service).get, name, api_key)
    media_type = FORMATS.get(extension(name), (None, "application/octet-stream"))[1]
    filename = name.split(".", 1)[1]
    return Response(data, media_type=media_type, headers={"Content-Disposition": f'attachment; filename="{filename}"'})
