"""DeepL's documents: POST /v2/document uploads a file (over the documents pipeline and its formats) and answers
{"document_id", "document_key"}; POST /v2/document/{id} answers its status; POST /v2/document/{id}/result returns the
translated file once. The job runs in the worker that took the upload; its state is on disk for every worker."""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from app.api.deepl.auth import DeepLKey, client_of
from app.api.deepl.errors import bad, rename
from app.api.deepl.glossaries import glossary_for
from app.api.deepl.jobs import DocumentJobs
from app.api.deepl.schemas import TranslateDocument
from app.api.deepl.text import languages_of, values_not_supported
from app.api.deps import FieldsDep, ServiceDep
from app.documents import Document
from app.documents.formats import extension, open_document
from app.documents.pipeline import Rounds, check_limits, translate_document
from app.documents.store import safe_filename
from app.errors import ApiError
from app.planner import Ask, plan_route
from app.service import Service

router = APIRouter()
DETECT_CHARS = 2000  # source_lang omitted: the language of the file's first characters
STATUS_WAIT_S = 2.0  # a status request waits this long for a running job to finish (clients poll every 5 s)
PROGRESS_S = 1.0  # how often a running job writes its seconds_remaining
RUNNING: set[asyncio.Task] = set()  # this worker's jobs (asyncio keeps only weak references to tasks)


def jobs_of(service: Service) -> DocumentJobs:
    """The document jobs of the server (beside the translated files of /translate_file)."""
    return DocumentJobs(service.settings.files_dir, service.settings.file_ttl_seconds)


async def read_upload(request: Request, service: Service) -> tuple[TranslateDocument, str, bytes]:
    """The fields, the file's name and bytes (400 naming the field; 413 naming max_file_bytes)."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise bad("file: send multipart/form-data with a `file` field")
    form = await request.form()
    upload, limit = form.get("file"), service.settings.max_file_bytes
    if not isinstance(upload, UploadFile):
        raise bad("Parameter 'file' not specified: a multipart file field named `file` is required")
    if not form.get("target_lang"):
        raise bad("Parameter 'target_lang' not specified.")
    data = await upload.read(limit + 1)
    if len(data) > limit:
        raise ApiError(413, "payload_too_large", f"file: over max_file_bytes={limit}")
    try:
        fields = TranslateDocument.model_validate({k: v for k, v in form.items() if k != "file"})
    except ValidationError as exc:
        raise bad(values_not_supported(exc)) from None
    return fields, upload.filename or "", data


FORM = {
    "type": "object",
    "required": ["file", "target_lang"],
    "properties": {
        "file": {"type": "string", "format": "binary"},
        **TranslateDocument.model_json_schema()["properties"],
    },
}


@router.post(
    "/document",
    openapi_extra={"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": FORM}}}},
)
async def upload(request: Request, service: ServiceDep, key: DeepLKey) -> dict:
    """Start translating an uploaded document; its id and key, for its status and result."""
    fields, filename, data = await read_upload(request, service)
    source, target = languages_of(service, fields.source_lang, fields.target_lang)
    terms = await glossary_for(service, request, key, fields.glossary_id, fields.source_lang)
    ext = extension(filename)
    if fields.output_format and fields.output_format.lower().lstrip(".") != ext:
        raise bad(f"Value for 'output_format' not supported: {fields.output_format} (no conversion from .{ext})")
    s = service.settings
    service.require_ready()
    doc, media_type = await asyncio.to_thread(open_document, filename, data, s, target)
    check_limits(doc, s)
    text = "".join(seg.text for seg in doc.segments)
    await service.limiter.admit(key, client_of(request), [text])
    sample = " ".join(seg.text for seg in doc.segments)[:DETECT_CHARS] or "-"
    rounds = Rounds(plan_route(service, Ask(source, target, glossary=terms), [sample]), s)
    jobs = jobs_of(service)
    doc_id, doc_key = await asyncio.to_thread(jobs.create, safe_filename(filename), media_type, len(text))
    task = asyncio.create_task(run(jobs, doc_id, doc, rounds, service))
    RUNNING.add(task)
    task.add_done_callback(RUNNING.discard)
    return {"document_id": doc_id, "document_key": doc_key}


async def run(jobs: DocumentJobs, doc_id: str, doc: Document, rounds: Rounds, service: Service) -> None:
    """Translate the document, writing its progress, then its file or its error, to the job's record."""
    started = time.monotonic()
    with service.in_flight():
        try:
            await asyncio.to_thread(jobs.update, doc_id, status="translating")
            work = asyncio.ensure_future(translate_document(doc, rounds))
            while not work.done():
                await asyncio.wait({work}, timeout=PROGRESS_S)
                if not work.done() and rounds.done:
                    spent = time.monotonic() - started
                    left = round(spent * (rounds.total - rounds.done) / rounds.done) + 1
                    await asyncio.to_thread(jobs.update, doc_id, seconds_remaining=left)
            await work
            out = await asyncio.to_thread(doc.save)
            await asyncio.to_thread(jobs.finish, doc_id, out)
        except Exception as exc:  # the job's error goes to its status, whatever it was
            message = rename(exc.message) if isinstance(exc, ApiError) else f"internal error: {type(exc).__name__}"
            await asyncio.to_thread(jobs.update, doc_id, status="error", error_message=message)


def document_key(fields: dict) -> str:
    """The request's document_key (400 when missing)."""
    key = fields.get("document_key")
    if not key or not isinstance(key, str):
        raise bad("Parameter 'document_key' not specified.")
    return key


@router.get("/document/{document_id}", operation_id="deepl_status_get")
@router.post("/document/{document_id}", operation_id="deepl_status")
async def status(document_id: str, service: ServiceDep, fields: FieldsDep, _: DeepLKey) -> dict:
    """The job's status: queued, translating (seconds_remaining), done (billed_characters) or error."""
    jobs, key = jobs_of(service), document_key(fields)
    record = await asyncio.to_thread(jobs.get, document_id, key)
    deadline = time.monotonic() + STATUS_WAIT_S
    while record["status"] in ("queued", "translating") and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        record = await asyncio.to_thread(jobs.get, document_id, key)
    body = {"document_id": document_id, "status": record["status"]}
    if record["status"] == "translating" and record["seconds_remaining"] is not None:
        body["seconds_remaining"] = record["seconds_remaining"]
    if record["status"] == "done":
        body.update(seconds_remaining=0, billed_characters=record["billed_characters"])
    if record["status"] == "error":
        body.update(error_message=record["error_message"], message=record["error_message"])
    return body


@router.get("/document/{document_id}/result", operation_id="deepl_result_get")
@router.post("/document/{document_id}/result", operation_id="deepl_result")
async def result(document_id: str, service: ServiceDep, fields: FieldsDep, _: DeepLKey) -> Response:
    """The translated file, once; 503 while the job runs, 400 when it failed, 404 once downloaded."""
    jobs, key = jobs_of(service), document_key(fields)
    record = await asyncio.to_thread(jobs.get, document_id, key)
    if record["status"] in ("queued", "translating"):
        raise ApiError(503, "not_ready", f"document_id: document {document_id} is not translated yet",
                       {"Retry-After": "1"})  # fmt: skip
    if record["status"] == "error":
        raise bad(f"document_id: the translation of {document_id} failed: {record['error_message']}")
    data, record = await asyncio.to_thread(jobs.take, document_id, key)
    disposition = f'attachment; filename="{record["filename"]}"'
    return Response(data, media_type=record["media_type"], headers={"Content-Disposition": disposition})
