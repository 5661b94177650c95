"""Which translated sentences a reader should review: those whose confidence (`model.confidence`, computed by the
engine core) is below a threshold, counted per model for operators (mt_low_confidence_sentences_total over
mt_confidence_sentences_total)."""

from __future__ import annotations

from app.metrics import Metrics


def text_confidence(confidences: list[float | None], weights: list[int]) -> float | None:
    """A text's confidence from its sentences': their mean weighted by source tokens (None when one has none)."""
    if not confidences or any(c is None for c in confidences):
        return None
    return round(sum(c * w for c, w in zip(confidences, weights, strict=True)) / max(sum(weights), 1), 4)


def lowest(details: dict) -> float | None:
    """The lowest confidence of a text's sentences (its own when it is one sentence; None: no confidence)."""
    sentences = details.get("sentences")
    return min(s["confidence"] for s in sentences) if sentences else details.get("confidence")


def mark(answers: list[dict], threshold: float, metrics: Metrics, model: str) -> None:
    """Each answer's details marked at `threshold` (low_confidence, each sentence's `low`), its sentences counted."""
    for answer in answers:
        details = answer["details"]
        if details.get("confidence") is None:
            continue
        sentences = details.get("sentences")
        values = [s["confidence"] for s in sentences] if sentences else [details["confidence"]]
        for s in sentences or []:
            s["low"] = s["confidence"] < threshold
        flagged = sum(c < threshold for c in values)
        details["low_confidence"] = flagged > 0
        metrics.confidence_sentences.labels(model).inc(len(values))
        metrics.low_confidence.labels(model).inc(flagged)
