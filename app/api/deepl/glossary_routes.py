"""DeepL's glossary endpoints (/v2/glossaries, /v2/glossaries/{id}, /v2/glossaries/{id}/entries as TSV,
/v2/glossary-language-pairs) over the same store as /glossaries: a glossary made through one API is usable from the
other, owned by the calling key when keys are on (another key's answers 404, as an unknown one does)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from app.api.deepl.auth import DeepLKey
from app.api.deepl.codes import deepl_code
from app.api.deepl.errors import bad
from app.api.deepl.glossaries import info
from app.api.deepl.schemas import CreateGlossary
from app.api.deepl.text import languages_of, values_not_supported
from app.api.deps import FieldsDep, ServiceDep
from app.api.glossaries import built, owner, stored
from app.errors import ApiError
from app.glossaries.entries import to_tsv

router = APIRouter()
TSV = "text/tab-separated-values; charset=utf-8"


def read(fields: dict) -> CreateGlossary:
    """POST /v2/glossaries' fields, checked: a missing one or a bad value is a 400 naming it, in DeepL's words."""
    for name in ("name", "source_lang", "target_lang", "entries"):
        if fields.get(name) in (None, ""):
            raise bad(f"Parameter '{name}' not specified.")
    try:
        return CreateGlossary.model_validate(fields)
    except ValidationError as exc:
        raise bad(values_not_supported(exc)) from None


@router.post("/glossaries", status_code=201)
async def create(request: Request, service: ServiceDep, fields: FieldsDep, key: DeepLKey) -> JSONResponse:
    """Store a glossary (TSV or CSV entries) for a language pair the models serve; DeepL's glossary object (201)."""
    body = read(fields)
    source, target = languages_of(service, body.source_lang, body.target_lang)
    if (source, target) not in service.pairs():
        raise bad(f"Unsupported glossary language pair: source_lang={body.source_lang}, target_lang="
                  f"{body.target_lang} (GET /v2/glossary-language-pairs lists the served pairs)")  # fmt: skip
    who = await owner(service, request, key)
    glossary = built(service, who, body.name, (source, target), body.entries, body.entries_format)
    await service.glossaries.store.add(glossary)
    return JSONResponse(info(glossary), 201)


@router.get("/glossaries")
async def listing(request: Request, service: ServiceDep, key: DeepLKey) -> dict:
    """The calling key's glossaries, oldest first."""
    found = await service.glossaries.store.list(await owner(service, request, key))
    return {"glossaries": [info(g) for g in found]}


@router.get("/glossaries/{glossary_id}")
async def describe(glossary_id: str, request: Request, service: ServiceDep, key: DeepLKey) -> dict:
    """One glossary's object; 404 for an unknown id or another key's."""
    return info(await stored(service, request, glossary_id, key))


@router.get("/glossaries/{glossary_id}/entries")
async def entries(glossary_id: str, request: Request, service: ServiceDep, key: DeepLKey) -> Response:
    """One glossary's entries as TSV (`source<TAB>target` lines, as DeepL's clients ask with Accept)."""
    found = await stored(service, request, glossary_id, key)
    return Response(to_tsv(found.entries), media_type=TSV)


@router.delete("/glossaries/{glossary_id}", status_code=204)
async def delete(glossary_id: str, request: Request, service: ServiceDep, key: DeepLKey) -> Response:
    """Delete a glossary (204); 404 for an unknown id or another key's."""
    if not await service.glossaries.store.delete(glossary_id, await owner(service, request, key)):
        raise ApiError(404, "not_found", f"glossary_id: no glossary {glossary_id!r}")
    return Response(status_code=204)


@router.get("/glossary-language-pairs")
async def pairs(service: ServiceDep, _: DeepLKey) -> dict:
    """The pairs glossaries can be made for (every served pair, DeepL's base codes in lower case)."""
    codes = sorted({(deepl_code(s).lower(), deepl_code(t).lower()) for s, t in service.pairs()})
    return {"supported_languages": [{"source_lang": s, "target_lang": t} for s, t in codes]}
