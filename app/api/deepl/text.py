"""DeepL's text endpoints: POST /v2/translate (through the one planner and the translation cache), GET/POST
/v2/languages and /v2/usage."""

from __future__ import annotations

from dataclasses import replace

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from app.api.answers import run_texts
from app.api.deepl import codes
from app.api.deepl.auth import DeepLKey, client_of
from app.api.deepl.errors import bad
from app.api.deepl.glossaries import glossary_for
from app.api.deepl.schemas import TranslateText
from app.api.deps import FieldsDep, ServiceDep
from app.planner import Ask, plan
from app.schemas import Parameters
from app.service import Service

router = APIRouter()
UNLIMITED = 1_000_000_000_000  # character_limit of a key without a daily limit, as DeepL's unlimited plans answer


def served(service: Service) -> tuple[set[str], set[str]]:
    """The served models' (sources, targets), in their API codes."""
    pairs = service.pairs()
    return {s for s, _ in pairs}, {t for _, t in pairs}


def languages_of(service: Service, source_lang: str | None, target_lang: str) -> tuple[str, str]:
    """The served (source, target) for DeepL's codes (source "auto" when omitted); 400 naming the field that is not
    served, the languages served on that side and the pairs served."""
    pairs = service.pairs()
    sources, targets = served(service)
    listed = f"served pairs: {codes.pairs(pairs)}"
    target = codes.served_code(target_lang, targets)
    if target is None:
        served_targets = ", ".join(t["language"] for t in codes.targets(targets))
        raise bad(f"Value for 'target_lang' not supported: {target_lang} (served targets: {served_targets}; {listed})")
    if source_lang is None:
        return "auto", target
    source = codes.served_code(source_lang, sources)
    if source is None:
        served_sources = ", ".join(s["language"] for s in codes.sources(sources))
        raise bad(f"Value for 'source_lang' not supported: {source_lang} (served sources: {served_sources}; {listed})")
    if (source, target) not in pairs:
        raise bad(f"Value for 'target_lang' not supported: {target_lang} from source_lang {source_lang} ({listed})")
    return source, target


def read(fields: dict) -> TranslateText:
    """The request's fields, checked: missing ones and bad values are 400s naming the field, in DeepL's words."""
    for name in ("text", "target_lang"):
        if fields.get(name) in (None, "", []):
            raise bad(f"Parameter '{name}' not specified.")
    try:
        return TranslateText.model_validate(fields)
    except ValidationError as exc:
        raise bad(values_not_supported(exc)) from None


def values_not_supported(exc: ValidationError) -> str:
    """One line per wrong field, as DeepL says it, with pydantic's reason."""
    parts = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err.get("loc", ())) or "body"
        parts.append(f"Value for '{field}' not supported: {err.get('msg', 'invalid')}.")
    return " ".join(parts)


def ask_of(body: TranslateText, service: Service) -> Ask:
    """What a /v2/translate body asks for, in the planner's words (its glossary resolved after)."""
    source, target = languages_of(service, body.source_lang, body.target_lang)
    params = Parameters(split_sentences=body.split_sentences != "0")
    return Ask(source, target, params, format=body.tag_handling or "text", ignore_tags=frozenset(body.ignore_tags))


BODY = {"schema": {"$ref": "#/components/schemas/TranslateText"}}
CONTENT = {ctype: BODY for ctype in ("application/json", "application/x-www-form-urlencoded")}


def body_schemas() -> dict[str, dict]:
    """OpenAPI component schema of the /v2/translate body (read by hand, so FastAPI does not add it)."""
    return {"TranslateText": TranslateText.model_json_schema(ref_template="#/components/schemas/{model}")}


@router.post("/translate", openapi_extra={"requestBody": {"required": True, "content": CONTENT}})
async def translate(request: Request, service: ServiceDep, fields: FieldsDep, key: DeepLKey) -> JSONResponse:
    """Translate `text` (one or more, in order) into `target_lang`; `source_lang` omitted: detected."""
    body = read(fields)
    ask = ask_of(body, service)
    ask = replace(ask, glossary=await glossary_for(service, request, key, body.glossary_id, body.source_lang))
    await service.limiter.admit(key, client_of(request), body.text)
    planned = plan(service, ask, body.text)
    answers, _, headers = await run_texts(request, planned, body.text, service)
    detected = codes.deepl_code(planned.route.source)
    out = []
    for text, answer in zip(body.text, answers, strict=True):
        item = {"detected_source_language": detected, "text": answer["text"]}
        if body.show_billed_characters:
            item["billed_characters"] = len(text)
        out.append(item)
    return JSONResponse({"translations": out}, headers=headers)


@router.get("/languages", operation_id="deepl_languages_get")
@router.post("/languages", operation_id="deepl_languages")
async def languages(service: ServiceDep, fields: FieldsDep, _: DeepLKey) -> list[dict]:
    """The languages the served models translate from (`type=source`, the default) or into (`type=target`)."""
    kind = fields.get("type") or "source"
    if kind not in ("source", "target"):
        raise bad("Parameter 'type' is invalid. 'source' and 'target' are valid values.")
    sources, targets = served(service)
    return codes.sources(sources) if kind == "source" else codes.targets(targets)


@router.get("/usage", operation_id="deepl_usage_get")
@router.post("/usage", operation_id="deepl_usage")
async def usage(request: Request, service: ServiceDep, key: DeepLKey) -> dict:
    """The calling key's characters today and its daily limit (no limit: a very large number)."""
    subject, limits = await service.limiter.limits_for(key, client_of(request))
    limit = limits["daily_char_limit"]
    count = await service.limiter.chars_today(subject)
    return {"character_count": count, "character_limit": limit if limit >= 0 else UNLIMITED}
