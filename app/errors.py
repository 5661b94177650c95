"""JSON errors: {"error": message naming the field and the limit, "error_type": ...}."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException


class ApiError(Exception):
    """An error with its HTTP status, contract error_type and optional headers."""

    def __init__(self, status: int, error_type: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.error_type, self.message, self.headers = status, error_type, message, headers or {}


def error_body(message: str, error_type: str) -> dict[str, str]:
    """The JSON body of every error."""
    return {"error": message, "error_type": error_type}


def describe_validation(errors: list[dict]) -> str:
    """One readable line per pydantic error, naming the field path."""
    parts = []
    for err in errors:
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body",)]
        field = ".".join(loc) if loc else "body"
        parts.append(f"{field}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


def install(app: FastAPI, on_error) -> None:
    """Register handlers so that every error is JSON in the contract's shape; `on_error(type)` counts them."""

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        on_error(exc.error_type)
        return JSONResponse(error_body(exc.message, exc.error_type), exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        on_error("validation")
        return JSONResponse(error_body(describe_validation(exc.errors()), "validation"), 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http")
        return JSONResponse(error_body(str(exc.detail), kind), exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        on_error("internal")
        return JSONResponse(error_body(f"internal error: {type(exc).__name__}", "internal"), 500)
