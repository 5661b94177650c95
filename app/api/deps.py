"""What the routes share: the service, the request's fields and its admission (API key and limits) as dependencies,
the error responses they document, and body validation that answers 422 naming the field."""

from __future__ import annotations

from typing import Annotated, TypeVar

from fastapi import Depends, Request
from pydantic import BaseModel, ValidationError

from app.api.fields import read_fields
from app.errors import ApiError, describe_validation
from app.schemas import ErrorBody
from app.service import Service

M = TypeVar("M", bound=BaseModel)
DISCONNECT_CHECK_S = 0.25  # how often a non-streamed request looks for a departed client
ERRORS = {code: {"model": ErrorBody} for code in (400, 403, 413, 415, 422, 500, 503)}


async def get_service(request: Request) -> Service:
    """The app's service object (async: a plain def would hop to a worker thread on every request)."""
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(get_service)]
FieldsDep = Annotated[dict, Depends(read_fields)]


def texts_of(q: object) -> list[str]:
    """The texts of a `q` field as sent (validation comes later)."""
    if isinstance(q, str):
        return [q]
    return [t for t in q if isinstance(t, str)] if isinstance(q, list) else []


async def admit(request: Request, service: ServiceDep, fields: FieldsDep) -> None:
    """Admit the request by its api_key and q (from any client shape) or refuse it (the service's Limiter)."""
    client = request.client.host if request.client else "unknown"
    await service.limiter.admit(fields.get("api_key"), client, texts_of(fields.get("q")))


Admitted = Annotated[None, Depends(admit)]


def dialect(name: str):
    """A dependency counting the route's requests in mt_api_requests_total{dialect=name}."""

    async def count(service: ServiceDep) -> None:
        service.metrics.api_requests.labels(name).inc()

    return Depends(count)


def require(data: dict, *names: str) -> None:
    """400 for the first field that is missing or empty, in LibreTranslate's words (its clients show them as is)."""
    for name in names:
        if data.get(name) in (None, "", []):
            raise ApiError(400, "validation", f"Invalid request: missing {name} parameter")


def validated(model: type[M], data: dict) -> M:
    """`data` as a `model`, or a 422 naming each wrong field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError(422, "validation", describe_validation(exc.errors())) from None
