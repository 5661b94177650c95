"""DeepL's v2 REST API over the same engine, keys, cache and documents: its clients (deepl on PyPI, deepl-node on
npm, and the tools built on them) work unchanged with the server's URL. Errors in DeepL's shape (app.api.deepl.errors,
for every path under PREFIX)."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deepl import documents, glossary_routes, text
from app.api.deepl.errors import respond

PREFIX = "/v2/"
router = APIRouter(prefix="/v2")
router.include_router(text.router)
router.include_router(documents.router)
router.include_router(glossary_routes.router)

body_schemas = text.body_schemas
__all__ = ["PREFIX", "body_schemas", "respond", "router"]
