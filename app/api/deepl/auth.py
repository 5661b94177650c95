"""The caller's DeepL key: `Authorization: DeepL-Auth-Key KEY` (DeepL's clients) or the legacy `auth_key` field,
checked against the server's keys when keys are on (403 otherwise); a key sent with DeepL's free-tier suffix `:fx` is
the stored key without it when only that one exists."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.api.deps import FieldsDep, ServiceDep
from app.errors import ApiError
from app.service import Service

PREFIX = "DeepL-Auth-Key "
FREE_SUFFIX = ":fx"


def client_of(request: Request) -> str:
    """The client's address (what limits count when keys are off)."""
    return request.client.host if request.client else "unknown"


async def stored_key(service: Service, key: str | None) -> str | None:
    """The key as the store knows it: as sent, else without `:fx` (keys off: as sent)."""
    if not service.settings.api_keys or not key or not key.endswith(FREE_SUFFIX):
        return key
    if await service.limiter.record(key) is not None:
        return key
    return key.removesuffix(FREE_SUFFIX)


async def caller_key(request: Request, service: ServiceDep, fields: FieldsDep) -> str | None:
    """The caller's key, once the keys (when on) accept it; any key, or none, when keys are off."""
    header = request.headers.get("authorization")
    key = fields.get("auth_key") if header is None else None
    if header is not None:
        if not header.startswith(PREFIX) and service.settings.api_keys:
            raise ApiError(403, "forbidden", "Authorization: expected the header 'DeepL-Auth-Key KEY'")
        key = header.removeprefix(PREFIX).strip()
    key = await stored_key(service, key if isinstance(key, str) else None)
    await service.limiter.limits_for(key, client_of(request))  # 403 for a missing or unknown key when keys are on
    return key


DeepLKey = Annotated[str | None, Depends(caller_key)]
