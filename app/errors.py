"""JSON errors: {"error": message naming the field and the limit, "error_type": ...}, or in the shape of the API
dialect whose path prefix the request names (DeepL's {"message": ...} under /v2/)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException


class ApiError(Exception):
    """An error with its HTTP status, contract error_type and optional headers."""

    def __init__(
        self, status: int, error_type: str, message: str, headers: dict[str, str] | None = None, reason: str = ""
    ):
        super().__init__(message)
        self.status, self.error_type, self.message, self.headers = status, error_type, message, headers or {}
        self.reason = reason  # the limit that refused it (app.keys), for dialects that tell them apart


Responder = Callable[[ApiError], JSONResponse]


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


def contract_response(exc: ApiError) -> JSONResponse:
    """An error in this server's own (LibreTranslate-based) shape."""
    return JSONResponse(error_body(exc.message, exc.error_type), exc.status, headers=exc.headers)


class Dialects:
    """Which error shape answers a path: the responder of the longest matching prefix, else the contract's."""

    def __init__(self, responders: dict[str, Responder] | None = None):
        self.responders = sorted((responders or {}).items(), key=lambda item: -len(item[0]))

    def respond(self, path: str, exc: ApiError) -> JSONResponse:
        """The error response for a request to `path`."""
        responder = next((r for prefix, r in self.responders if path.startswith(prefix)), contract_response)
        return responder(exc)


def install(app: FastAPI, on_error, dialects: Dialects) -> None:
    """Register handlers so that every error is JSON in its dialect's shape; `on_error(type)` counts them."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        on_error(exc.error_type)
        return dialects.respond(request.url.path, exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        on_error("validation")
        return dialects.respond(request.url.path, ApiError(422, "validation", describe_validation(exc.errors())))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http")
        error = ApiError(exc.status_code, kind, str(exc.detail), getattr(exc, "headers", None))
        return dialects.respond(request.url.path, error)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        on_error("internal")
        return dialects.respond(request.url.path, ApiError(500, "internal", f"internal error: {type(exc).__name__}"))
