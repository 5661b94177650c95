"""/glossaries: stored glossaries (DeepL's v2 shape, LibreTranslate's field names), each owned by the API key that
made it (when keys are on; else anyone's); and the glossary of a translation request (inline entries over a stored
one). Another key's glossary answers 404, as an unknown one does."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from app.api.deps import ERRORS, FieldsDep, ServiceDep, validated
from app.errors import ApiError
from app.glossaries.entries import FORMATS, GlossaryError, checked, merged, parse_inline, parse_text, to_tsv
from app.glossaries.records import Glossary, Terms
from app.service import Service

router = APIRouter()


class GlossaryRequest(BaseModel):
    """POST /glossaries body (JSON or form)."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=256)
    source: str = Field(min_length=1, max_length=16)
    target: str = Field(min_length=1, max_length=16)
    entries: str = Field(description="TSV (source<TAB>target per line) or CSV (source,target per row)")
    entries_format: str = Field("tsv", description=" or ".join(FORMATS))
    api_key: str | None = None


def refused(exc: GlossaryError) -> ApiError:
    """The HTTP error of refused entries."""
    return ApiError(exc.status, "payload_too_large" if exc.status == 413 else "validation", exc.message)


async def owner(service: Service, request: Request, api_key: object) -> str:
    """Who owns the glossaries this request sees: its key ("key:NAME"; 403 when missing or invalid), or nobody ("")
    when keys are off."""
    if not service.settings.api_keys:
        return ""
    client = request.client.host if request.client else "unknown"
    return (await service.limiter.limits_for(api_key, client))[0]


async def stored(service: Service, request: Request, glossary_id: str, api_key: object) -> Glossary:
    """The requester's glossary with this id; 404 (naming the id) for an unknown one and for another key's."""
    found = await service.glossaries.store.get(glossary_id, await owner(service, request, api_key))
    if found is None:
        raise ApiError(404, "not_found", f"glossary_id: no glossary {glossary_id!r}")
    return found


async def request_terms(service: Service, request: Request, fields: dict) -> Terms | None:
    """The glossary a translation request asks for (`glossary` inline entries over the stored `glossary_id`); None
    when it names none. 4xx naming the entry or the limit; 404 for an unknown or another key's glossary_id."""
    inline, glossary_id = fields.get("glossary"), fields.get("glossary_id")
    if inline in (None, "") and glossary_id in (None, ""):
        return None
    limits = service.glossaries.limits
    try:
        entries = checked(parse_inline(inline), limits, "glossary") if inline not in (None, "") else ()
        if glossary_id in (None, ""):
            return Terms(entries)
        if not isinstance(glossary_id, str):
            raise ApiError(422, "validation", "glossary_id: expected a string")
        found = await stored(service, request, glossary_id, fields.get("api_key"))
        return Terms(merged(found.entries, entries, limits), (found.source, found.target), found.id)
    except GlossaryError as exc:
        raise refused(exc) from None


def built(service: Service, who: str, name: str, pair: tuple[str, str], text: str, fmt: str) -> Glossary:
    """A new glossary of `who` for the served pair from TSV or CSV entries (every API's POST makes it here; nothing
    stored yet): 4xx naming the entry or the limit, 422 for no entry."""
    try:
        entries = checked(parse_text(text, fmt, "entries"), service.glossaries.limits, "entries")
    except GlossaryError as exc:
        raise refused(exc) from None
    if not entries:
        raise ApiError(422, "validation", "entries: no entry")
    return Glossary(name, *pair, entries, owner=who)


@router.post("/glossaries", status_code=201, responses=ERRORS)
async def create(request: Request, service: ServiceDep, fields: FieldsDep) -> JSONResponse:
    """Store a glossary for one language pair from TSV or CSV entries; its description (201)."""
    body = validated(GlossaryRequest, fields)
    who = await owner(service, request, body.api_key)
    if body.source == "auto":
        raise ApiError(422, "validation", "source: a glossary needs a source language, not 'auto'")
    service.route(body.source, body.target)  # 400 unsupported_language for a pair no model serves
    glossary = built(service, who, body.name, (body.source, body.target), body.entries, body.entries_format)
    await service.glossaries.store.add(glossary)
    return JSONResponse(glossary.info(), 201)


@router.get("/glossaries", responses=ERRORS)
async def listing(request: Request, service: ServiceDep, api_key: str | None = None) -> dict:
    """The requester's glossaries (descriptions, oldest first)."""
    found = await service.glossaries.store.list(await owner(service, request, api_key))
    return {"glossaries": [g.info() for g in found]}


@router.get("/glossaries/{glossary_id}", responses={**ERRORS, 404: ERRORS[400]})
async def describe(glossary_id: str, request: Request, service: ServiceDep, api_key: str | None = None) -> dict:
    """One glossary's description."""
    return (await stored(service, request, glossary_id, api_key)).info()


@router.get("/glossaries/{glossary_id}/entries", responses={**ERRORS, 404: ERRORS[400]})
async def entries(glossary_id: str, request: Request, service: ServiceDep, api_key: str | None = None) -> Response:
    """One glossary's entries as TSV."""
    found = await stored(service, request, glossary_id, api_key)
    return Response(to_tsv(found.entries), media_type="text/tab-separated-values; charset=utf-8")


@router.delete("/glossaries/{glossary_id}", status_code=204, responses={**ERRORS, 404: ERRORS[400]})
async def delete(glossary_id: str, request: Request, service: ServiceDep, api_key: str | None = None) -> Response:
    """Delete a glossary (204); 404 when the requester has none with this id."""
    if not await service.glossaries.store.delete(glossary_id, await owner(service, request, api_key)):
        raise ApiError(404, "not_found", f"glossary_id: no glossary {glossary_id!r}")
    return Response(status_code=204)
