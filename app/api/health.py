"""Liveness and readiness; GET /health as LibreTranslate answers it."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.api.deps import ServiceDep

router = APIRouter(prefix="/health")


def alive(service: ServiceDep, word: str) -> JSONResponse:
    """{"status": word} while the process can serve (also while loading or draining); 503 once it never can."""
    why = service.broken()
    if why is None:
        return JSONResponse({"status": word})
    return JSONResponse({"status": "broken", "reason": why, "error_type": "not_ready"}, 503)


@router.get("")
async def health(service: ServiceDep) -> JSONResponse:
    """LibreTranslate's health check: {"status": "ok"} while the process can serve (as /health/live)."""
    return alive(service, "ok")


@router.get("/live")
async def live(service: ServiceDep) -> JSONResponse:
    """200 while the process can serve (also while loading or draining); 503 once it never can: restart it."""
    return alive(service, "live")


@router.get("/ready")
async def ready(service: ServiceDep) -> JSONResponse:
    """200 only when every model is loaded and warmed up, its engine is alive, and the key store answers (when keys
    or limits are on); 503 otherwise."""
    await service.check_dependencies()
    ok, reason = service.readiness()
    if ok:
        return JSONResponse({"status": "ready"})
    return JSONResponse({"status": "not_ready", "reason": reason, "error_type": "not_ready"}, 503)
