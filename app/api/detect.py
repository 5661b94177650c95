"""POST /detect: LibreTranslate's language detection, among the served source languages (as LibreTranslate detects
among its installed ones), or every language the detector knows when asked."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import ERRORS, Admitted, FieldsDep, ServiceDep, require, validated
from app.api.fields import FORM_TYPES
from app.errors import ApiError
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
        "requestBody": {"required": True, "content": {ctype: BODY for ctype in ("application/json", *FORM_TYPES)}}
    },
)
async def detect(service: ServiceDep, fields: FieldsDep, _: Admitted) -> list:
    """The likeliest languages of `q` among the served sources (`all_languages`: among every language the detector
    knows), best first, with confidence in percent (a list of lists for a list `q`)."""
    require(fields, "q")
    body = validated(DetectRequest, fields)
    service.require_ready()
    texts = body.texts
    if not texts or any(not t.strip() for t in texts):
        raise ApiError(422, "validation", "q: must be a non-empty text or list of non-empty texts")
    if len(texts) > service.settings.max_items:
        raise ApiError(422, "validation", f"q: {len(texts)} texts exceeds max_items={service.settings.max_items}")
    among = None if body.all_languages else sorted({s for s, _ in service.pairs()})
    answers = [service.detector.rank(t, among) for t in texts]
    return answers[0] if isinstance(body.q, str) else answers
