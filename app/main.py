"""The FastAPI app: lifespan loads models in the background; errors are JSON; bodies are size-limited; a client that
stops reading is dropped (app.write_timeout)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from starlette.types import ASGIApp, Receive, Scope, Send

from app import errors
from app.api import deepl, detect, files, frontend, glossaries, health, info, page, translate
from app.api.deps import dialect
from app.errors import ApiError, Dialects
from app.service import Service
from app.settings import Settings
from app.write_timeout import WriteTimeout

log = logging.getLogger("mt")


class BodyLimit:
    """413 for bodies over the limit: by Content-Length up front, or while a chunked body streams in."""

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        on_error: Callable[[str], None] = lambda kind: None,
        paths: dict[str, tuple[int, str]] | None = None,
        dialects: Dialects | None = None,
    ):
        self.app, self.limit, self.on_error = app, limit, on_error
        self.paths = paths or {}  # path -> (limit, how the error names it) where another limit applies
        self.dialects = dialects or Dialects()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit, named = self.paths.get(scope["path"], (self.limit, f"max_body_bytes={self.limit}"))
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            error = ApiError(413, "payload_too_large", f"body: {int(length)} bytes exceeds {named}")
            self.on_error("payload_too_large")
            return await self.dialects.respond(scope["path"], error)(scope, receive, send)
        seen = 0

        async def limited() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise ApiError(413, "payload_too_large", f"body: over {named}")
            return message

        return await self.app(scope, limited, send)


def create_app(settings: Settings | None = None, service: Service | None = None) -> FastAPI:
    """Build the app; it connects to its engine cores once it starts (ready turns 200 when they serve)."""
    service = service or Service(settings or Settings())
    settings = service.settings

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await service.start()
        yield
        await service.stop()

    # Swagger UI and ReDoc served from the package (no CDN): /docs works without a network
    app = FastAPIOffline(title="mt-server", summary="Encoder-decoder translation server", lifespan=lifespan)
    app.state.service = service

    def count_failure(kind: str) -> None:
        """Count one error answer in mt_request_failures_total."""
        service.metrics.failures.labels(kind).inc()

    dialects = Dialects({deepl.PREFIX: deepl.respond})
    errors.install(app, count_failure, dialects)
    libre = {"tags": ["LibreTranslate"], "dependencies": [dialect("libretranslate")]}
    for router in (translate.router, files.router, glossaries.router, detect.router, frontend.router):
        app.include_router(router, **libre)
    app.include_router(deepl.router, tags=["DeepL v2"], dependencies=[dialect("deepl")])
    app.include_router(health.router)
    app.include_router(info.router)
    app.include_router(page.router)
    form = 64_000  # the form fields around an uploaded file
    named = f"max_file_bytes={settings.max_file_bytes} (+{form} bytes of form fields)"
    paths = {path: (settings.max_file_bytes + form, named) for path in ("/translate_file", "/v2/document")}
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes, on_error=count_failure, paths=paths, dialects=dialects)
    abort = lambda scope: service.abort_connection(scope)  # noqa: E731  (set by the worker once its server exists)
    app.add_middleware(WriteTimeout, timeout=settings.write_timeout_seconds, abort=abort, on_error=count_failure)
    schemas = {**translate.body_schemas(), **detect.body_schemas(), **deepl.body_schemas()}
    app.openapi = with_schemas(app.openapi, schemas)
    return app


def with_schemas(openapi: Callable[[], dict], schemas: dict[str, dict]) -> Callable[[], dict]:
    """FastAPI's OpenAPI generator, plus component schemas that routes reference by hand."""

    def generate() -> dict:
        spec = openapi()
        spec.setdefault("components", {}).setdefault("schemas", {}).update(schemas)
        return spec

    return generate
