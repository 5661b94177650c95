"""POST /detect: LibreTranslate's language detection, among the source languages the server serves."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import ValidationError

from app.api.translate import ERRORS, ServiceDep, read_fields
from app.errors import ApiError, describe_validation
from app.schemas import Detection, DetectRequest

router = APIRouter()
BODY = {"schema": {"$ref": "#/components/schemas/DetectRequest"}}


def body_schemas() -> dict[str, dict]:
    """OpenAPI component schema of the request body (read by hand, so FastAPI does not add it)."""
    return {"DetectRequest": DetectRequest.model_json_schema(ref_template="#/components/schemas/{model}")}


@router.post(
    "/detect",
    response_model=list[Detection] | list[list[Detection]],
    responses=ERRORS,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": BODY, "application/x-www-form-urlencoded": BODY},
        }
    },
)
async def detect(request: Request, service: ServiceDep) -> list:
    """The likeliest languages of `q`, best first, with confidence in percent (a list of lists for a list `q`)."""
    try:
        body = DetectRequest.model_validate(await read_fields(request))
    except ValidationError as exc:
        raise ApiError(422, "validation", describe_validation(exc.errors())) from None
    s = service.settings
    if s.api_keys and body.api_key not in s.api_keys:
        raise ApiError(403, "forbidden", "api_key: missing or invalid API key")
    service.require_ready()
    texts = [body.q] if isinstance(body.q, str) else body.q
    if not texts or any(not t.strip() for t in texts):
        raise ApiError(422, "validation", "q: must be a non-empty text or list of non-empty texts")
    if len(texts) > s.max_items:
        raise ApiError(422, "validation", f"q: {len(texts)} texts exceeds max_items={s.max_items}")
    sources = sorted({source for source, _ in service.pairs()})
    answers = [service.detector.rank(t, sources) for t in texts]
    return answers[0] if isinstance(body.q, str) else answers
