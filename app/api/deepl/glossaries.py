"""The seam for DeepL's glossaries (`glossary_id` on /v2/translate and /v2/document): the glossary store comes with
the glossary issue; until it is wired here every glossary id is unknown, as DeepL answers one it does not hold."""

from __future__ import annotations

from app.api.deepl.errors import bad
from app.errors import ApiError


def glossary_for(glossary_id: str | None, source: str | None, target: str) -> None:
    """The glossary a request names for source -> target (None when it names none); 404 for an unknown id, 400 when
    no source_lang is given (DeepL needs one with a glossary)."""
    if not glossary_id:
        return None
    if source is None:
        raise bad("source_lang: use of a glossary requires the source_lang parameter to be specified")
    raise ApiError(404, "not_found", f"glossary_id: glossary {glossary_id} not found")
