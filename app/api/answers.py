"""What every dialect's text route runs: the planned texts through the translation cache and one engine job, counted in
flight, and each text's answer (translation, alternatives, details, glossary report, confidence marks)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Request

from app.api.deps import DISCONNECT_CHECK_S
from app.cache import cacheable
from app.errors import ApiError
from app.job import Item, Job
from app.planner import Ask, Plan
from app.review import mark, text_confidence
from app.service import Service


def alternatives(job: Job, item: Item, n: int) -> list[str]:
    """Up to n texts from the item's n-best list, distinct from the translation and from each other."""
    seen, out = {job.texts(item)}, []
    for rank in range(1, job.params.num_hypotheses):
        text = job.texts(item, rank)
        if text not in seen and len(out) < n:
            seen.add(text)
            out.append(text)
    return out


def item_answer(job: Job, item: Item, ask: Ask) -> dict:
    """One text's translation, alternatives and details."""
    results = [u.result for u in item.units]  # none when the text is all markup
    hyps = [r.hypotheses[0] for r in results]
    reason = "length" if any(h.finish_reason == "length" for h in hyps) else "eos"
    score = sum(h.score for h in hyps) / max(len(hyps), 1) if ask.parameters.return_scores else None
    confidence = text_confidence([h.confidence for h in hyps], [len(u.ids) for u in item.units])
    details = {
        "model": job.entry.checkpoint.name,
        "input_tokens": sum(len(u.ids) for u in item.units),
        "generated_tokens": sum(len(h.tokens) for h in hyps),
        "finish_reason": reason,
        "score": score,
        "confidence": confidence,
        "queue_ms": round(max((r.queue_s for r in results), default=0.0) * 1000, 3),
        "total_ms": round(max((r.total_s for r in results), default=0.0) * 1000, 3),
        "cached": False,
    }
    if confidence is not None and len(hyps) > 1:  # a text split into sentences: each one's
        details["sentences"] = [{"text": job.unit_text(item, u), "confidence": round(h.confidence, 4)}
                                for u, h in enumerate(hyps)]  # fmt: skip
    text = job.texts(item)
    if item.layout.tagged or item.layout.fallbacks:  # inline tags: how many were not placed by alignment
        details["markup_fallbacks"] = item.fallbacks
    return {"text": text, "alternatives": alternatives(job, item, ask.alternatives), "details": details}


def with_glossary(answer: dict, planned: Plan, index: int) -> dict:
    """The answer with details.glossary (the entries text `index` matched, each applied or not) when one was given."""
    if planned.glossary is not None:
        answer["details"]["glossary"] = planned.glossary_report(index, answer["text"])
    return answer


def reviewed(answers: list[dict], planned: Plan, service: Service) -> list[dict]:
    """The answers with their low-confidence sentences marked at the request's threshold (else the server's), and
    counted."""
    threshold = planned.ask.parameters.confidence_threshold
    threshold = service.settings.confidence_threshold if threshold is None else threshold
    mark(answers, threshold, service.metrics, planned.route.entry.checkpoint.name)
    return answers


async def start(job: Job, service: Service) -> Callable[[], None]:
    """Submit a job to its engine core, counted in flight (for draining): the count's release, for when it ends."""
    release = service.hold()
    try:
        await job.submit()
    except BaseException:
        job.abort()
        release()
        raise
    return release


async def run_texts(
    request: Request, planned: Plan, texts: list[str], service: Service
) -> tuple[list[dict], Job | None, dict[str, str]]:
    """Each planned text's answer (item_answer's shape, whatever the dialect): cached texts from the cache, the others
    from one engine job (then cached); the job (None: the cache answered all) and X-Cache (hit, miss or partial)."""
    n = len(planned.layouts)
    use_cache = service.cache.enabled and cacheable(planned.params, False)
    keys = planned.cache_keys(texts) if use_cache else []
    answers = await service.cache.get_many(keys) if use_cache else [None] * n
    misses = [i for i, a in enumerate(answers) if a is None]
    job = planned.job([planned.layouts[i] for i in misses], service.settings) if misses else None
    if job is not None:
        release = await start(job, service)
        try:
            await collect(job, request)
        finally:
            release()
        for i, item in zip(misses, job.items, strict=True):
            answers[i] = item_answer(job, item, planned.ask)
        if use_cache:
            await service.cache.put_many({keys[i]: stored(answers[i]) for i in misses})
    for i in set(range(n)) - set(misses):
        answers[i]["details"].update(queue_ms=0.0, total_ms=0.0, cached=True)
    answers = reviewed([with_glossary(a, planned, i) for i, a in enumerate(answers)], planned, service)  # cached too
    headers = {"x-cache": "miss" if len(misses) == n else "hit" if not misses else "partial"} if use_cache else {}
    return answers, job, headers


def stored(answer: dict) -> dict:
    """An answer as the cache keeps it: without this request's timings."""
    details = {k: v for k, v in answer["details"].items() if k not in ("queue_ms", "total_ms", "cached")}
    return {**answer, "details": details}


async def collect(job: Job, request: Request) -> None:
    """Wait for every unit; abort if the client goes away (checked even while tokens flow) or a unit fails."""

    async def client_gone() -> None:
        if await request.is_disconnected():
            raise ApiError(499, "client_closed", "client disconnected")

    await job.wait_all(check=client_gone, every=DISCONNECT_CHECK_S)
