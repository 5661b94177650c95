"""Errors as DeepL sends them: {"message": ...} with DeepL's status codes (400 for any bad request, 456 when a key's
character quota is spent, 429 with Retry-After when over a rate or the queue is full), fields named in DeepL's words."""

from __future__ import annotations

import re

from fastapi.responses import JSONResponse

from app.errors import ApiError

# the shared machinery names fields in LibreTranslate's words (app.planner, app.keys): DeepL's names for them
FIELDS = {
    "q": "text",
    "source": "source_lang",
    "target": "target_lang",
    "api_key": "auth_key (the Authorization header's DeepL-Auth-Key)",
}
LEADING_FIELD = re.compile(r"^(q|source|target|api_key)(?=[\[:. ])")


def rename(message: str) -> str:
    """A message whose leading field name is LibreTranslate's, with DeepL's name for it."""
    message = message.replace("parameters.split_sentences", "split_sentences")
    return LEADING_FIELD.sub(lambda m: FIELDS[m.group(1)], message)


def status(exc: ApiError) -> int:
    """DeepL's status code for an error: 400 for every bad request, 456 for a spent daily quota, 429 when busy."""
    if exc.status in (415, 422):
        return 400
    if exc.status == 429 and exc.reason == "daily_char_limit":
        return 456
    if exc.error_type == "overloaded":
        return 429
    return exc.status


def respond(exc: ApiError) -> JSONResponse:
    """The error response in DeepL's shape (its clients read `message` and the status code)."""
    return JSONResponse({"message": rename(exc.message)}, status(exc), headers=exc.headers)


def bad(message: str) -> ApiError:
    """A 400 in DeepL's words."""
    return ApiError(400, "validation", message)
