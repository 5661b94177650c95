"""What the server offers: languages, models and limits, metrics, the API's OpenAPI document."""

from __future__ import annotations

import dataclasses
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.api.deps import ServiceDep, dialect
from app.glossaries.entries import FORMATS
from app.languages import listing
from app.schemas import Language
from app.settings import BUILTIN

router = APIRouter()


def _version() -> str:
    """The installed package version."""
    try:
        return version("mt-server")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "dev"


@router.get(
    "/languages", response_model=list[Language], tags=["LibreTranslate"], dependencies=[dialect("libretranslate")]
)
async def languages(service: ServiceDep) -> list[dict]:
    """Source languages with the targets each can be translated into (ISO 639-1 codes where one exists)."""
    return listing(service.pairs())


@router.get("/info")
async def info(service: ServiceDep) -> dict:
    """Models (pair, size, dtype, device), limits and version."""
    s = service.settings
    models = []
    for entry in service.models.values():
        ck = entry.checkpoint
        waiting, running = entry.engine.load
        models.append(
            {
                "name": ck.name,
                "kind": ck.kind,
                "source": ck.source_lang,
                "target": ck.target_lang,
                "languages": {"sources": list(ck.languages.sources), "targets": list(ck.languages.targets)},
                "generation": dataclasses.asdict(ck.defaults),
                "path": str(ck.path),
                "builtin": Path(ck.path).resolve().is_relative_to(BUILTIN.parent.resolve()),  # the small demo model
                "parameters": entry.card.parameters,
                "dtype": entry.card.dtype,
                "dtype_reason": entry.card.dtype_reason,
                "device": entry.card.device,
                "batch": entry.card.batch,
                "architecture": ck.config.to_dict(),
                "waiting": waiting,
                "running": running,
            }
        )
    limits = {
        k: getattr(s, k)
        for k in (
            "max_batch_size",
            "max_batch_rows",
            "max_batch_tokens",
            "max_prefill_tokens",
            "max_queue",
            "max_input_tokens",
            "max_items",
            "max_new_tokens",
            "default_max_new_tokens",
            "max_beam_size",
            "max_body_bytes",
            "req_limit",
            "char_limit",
            "daily_char_limit",
            "batch_limit",
            "max_file_bytes",
            "max_unzipped_bytes",
            "max_zip_entries",
            "max_segments",
            "max_file_chars",
            "file_ttl_seconds",
            "glossary_max_entries",
            "glossary_max_entry_bytes",
            "glossary_max_bytes",
        )
    }
    limits["api_keys"] = s.api_keys
    glossaries = {
        "supported": True,
        "entries_formats": list(FORMATS),
        "max_entries": s.glossary_max_entries,
        "max_entry_bytes": s.glossary_max_entry_bytes,
        "max_bytes": s.glossary_max_bytes,
        "constraints_per_unit": max(0, s.max_beam_size - 1),
        "beam": "a unit with n constraints, the longest of t tokens, decodes with a beam of at least "
        "max(2, n + 1, min(max(t + 1, 4), max_beam_size)), greedy requests too; each term placed where the decoder's "
        "alignment reaches its source words",
    }
    ok, reason = service.readiness()
    return {"version": _version(), "ready": ok, "status": reason, "models": models, "limits": limits,
            "glossaries": glossaries}  # fmt: skip


@router.get("/metrics")
async def metrics(service: ServiceDep) -> Response:
    """Prometheus text format."""
    return Response(service.metrics.render(), media_type=CONTENT_TYPE_LATEST)


@router.get("/spec", include_in_schema=False)
async def spec(request: Request) -> dict:
    """The OpenAPI document, where LibreTranslate serves its own (the same as /openapi.json)."""
    return request.app.openapi()
