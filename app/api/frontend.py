"""LibreTranslate's frontend endpoints: GET /frontend/settings and POST /suggest (suggestions are off here)."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import ServiceDep
from app.documents.formats import FORMATS
from app.errors import ApiError
from model.loading.languages import language_name

router = APIRouter()
FRONTEND_TIMEOUT_MS = 500  # LibreTranslate's default: the page translates after this pause in typing


@router.get("/frontend/settings")
async def frontend_settings(service: ServiceDep) -> dict:
    """What LibreTranslate's web page and clients read at start: limits, whether keys are needed, languages."""
    s, pairs = service.settings, service.pairs()
    target = pairs[0][1] if pairs else "en"
    return {
        "charLimit": s.char_limit,
        "frontendTimeout": FRONTEND_TIMEOUT_MS,
        "apiKeys": s.api_keys,
        "keyRequired": s.api_keys,
        "suggestions": False,
        "filesTranslation": True,
        "supportedFilesFormat": [f".{ext}" for ext in FORMATS],
        "language": {
            "source": {"code": "auto", "name": "Auto Detect"},
            "target": {"code": target, "name": language_name(target)},
        },
    }


@router.post("/suggest")
async def suggest() -> None:
    """Suggestions are not collected: 403, as LibreTranslate answers with suggestions off."""
    raise ApiError(403, "forbidden", "Suggestions are disabled on this server.")
