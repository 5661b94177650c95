"""What the routes share: the service and the request's fields as dependencies, the error responses they document,
and body validation that answers 422 naming the field."""

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


def validated(model: type[M], data: dict) -> M:
    """`data` as a `model`, or a 422 naming each wrong field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError(422, "validation", describe_validation(exc.errors())) from None
