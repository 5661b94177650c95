"""DeepL's glossaries over the one glossary store: a translation request's `glossary_id` (/v2/translate,
/v2/document) resolved as the LibreTranslate dialect resolves it (owner: the calling key), and DeepL's glossary
object (lower-case DeepL codes, `ready`) of a stored glossary."""

from __future__ import annotations

from fastapi import Request

from app.api.deepl.codes import deepl_code
from app.api.deepl.errors import bad
from app.api.glossaries import request_terms
from app.glossaries.records import Glossary, Terms
from app.service import Service


async def glossary_for(
    service: Service, request: Request, key: str | None, glossary_id: str | None, source_lang: str | None
) -> Terms | None:
    """The terms of the glossary a request names (None when it names none); 400 when no source_lang is given (DeepL
    needs one with a glossary), 404 for an unknown id or another key's. The planner refuses (400) a glossary whose
    pair is not the request's."""
    if not glossary_id:
        return None
    if source_lang is None:
        raise bad("source_lang: use of a glossary requires the source_lang parameter to be specified")
    return await request_terms(service, request, {"glossary_id": glossary_id, "api_key": key})


def info(glossary: Glossary) -> dict:
    """DeepL's glossary object: its id, name, ready, pair (DeepL's codes in lower case), creation time, entry count."""
    base = glossary.info()
    return {"glossary_id": glossary.id, "name": glossary.name, "ready": True,
            "source_lang": deepl_code(glossary.source).lower(), "target_lang": deepl_code(glossary.target).lower(),
            "creation_time": base["creation_time"], "entry_count": base["entry_count"]}  # fmt: skip
