"""A request's fields from any shape LibreTranslate's and DeepL's clients send: the query string, a urlencoded or
multipart form, or a JSON object; the body wins over the query string. JSON nested past the parser's depth is a 422,
not a 500."""

from __future__ import annotations

from urllib.parse import parse_qsl

import msgspec
from fastapi import Request
from starlette.datastructures import UploadFile

from app.errors import ApiError

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
LIST_FIELDS = ("q", "text", "ignore_tags", "splitting_tags", "non_splitting_tags")  # a repeated field gives a list
JSON_FIELDS = ("parameters",)  # JSON text in a form or the query string


def parse_json(raw: bytes | str, field: str):
    """Decode JSON or fail with 422 naming `field` (also for nesting too deep to decode, e.g. 100,000 brackets)."""
    try:
        return msgspec.json.decode(raw or b"null")
    except msgspec.DecodeError as exc:
        raise ApiError(422, "validation", f"{field}: invalid JSON ({exc})") from None
    except RecursionError:
        raise ApiError(422, "validation", f"{field}: JSON nested too deeply (limit ~1000 levels)") from None


def _multi(pairs: list[tuple[str, object]]) -> dict:
    """Key/value pairs as a dict: list fields that repeat become lists; files are skipped; JSON fields decoded."""
    data: dict = {}
    for key, value in pairs:
        if isinstance(value, UploadFile):
            continue
        if key in LIST_FIELDS and key in data:
            data[key] = [*data[key], value] if isinstance(data[key], list) else [data[key], value]
        else:
            data[key] = value
    for key in JSON_FIELDS:
        if isinstance(data.get(key), str):
            data[key] = parse_json(data[key], key)
    return data


def content_type(request: Request) -> str:
    """The media type of the body, lower case, without parameters."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def read_fields(request: Request) -> dict:
    """Every field of the request: query string, then the body (JSON object or form) over it; 415 for other bodies.
    A FastAPI dependency (cached per request, so the key check and the route read the body once)."""
    data = _multi(list(request.query_params.multi_items()))
    ctype = content_type(request)
    if ctype == "multipart/form-data":
        form = await request.form()
        data.update(_multi(list(form.multi_items())))
        return data
    raw = await request.body()
    if ctype == "application/x-www-form-urlencoded":  # as UTF-8 (curl -d sends it unescaped), as Flask reads it
        data.update(_multi(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True)))
        return data
    if ctype in ("", "application/json") or ctype.endswith("+json"):
        if not raw.strip():  # no body: the query string's fields, if any (curl -X POST '...?q=...')
            return data
        body = parse_json(raw, "body")
        if not isinstance(body, dict):
            raise ApiError(422, "validation", "body: expected a JSON object")
        data.update(body)
        return data
    accepted = ", ".join(["application/json", *FORM_TYPES])
    raise ApiError(415, "unsupported_media_type", f"content-type: {ctype} is not accepted; send {accepted}")
