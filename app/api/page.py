"""The "try it" page: GET / and its static files (plain HTML, CSS and JS modules; no build step)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

STATIC = Path(__file__).resolve().parents[1] / "static"
TYPES = {"app.js": "text/javascript", "events.js": "text/javascript", "files.js": "text/javascript",
         "style.css": "text/css"}  # fmt: skip
# same-origin only: the page talks to this server and loads nothing from elsewhere
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
PAGE_HEADERS = {**HEADERS, "Content-Security-Policy": CSP}

router = APIRouter(include_in_schema=False)


@router.get("/")
async def index() -> FileResponse:
    """The page."""
    return FileResponse(STATIC / "index.html", media_type="text/html", headers=PAGE_HEADERS)


@router.get("/static/{name}")
async def static(name: str) -> FileResponse:
    """The page's scripts and stylesheet (a fixed list: nothing else on disk is reachable)."""
    if name not in TYPES:
        raise HTTPException(404, f"static/{name}: no such file")
    return FileResponse(STATIC / name, media_type=TYPES[name], headers=HEADERS)
