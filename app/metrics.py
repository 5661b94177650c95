"""Prometheus metrics, one place. With PROMETHEUS_MULTIPROC_DIR set (the launcher sets it), every process of the
server (engine cores, HTTP workers) writes its own files and any worker's /metrics adds them all up."""

from __future__ import annotations

import bisect
import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256)

ERROR_TYPES = (
    "unsupported_language", "payload_too_large", "validation", "overloaded", "not_ready", "generation", "forbidden",
    "rate_limited", "unavailable", "insufficient_storage", "stalled_client",
)  # fmt: skip
RETRY_REASONS = ("placed", "agreement", "unfinished")  # why a glossary text is decoded again
DIALECTS = ("libretranslate", "deepl")  # the APIs the server speaks (mt_api_requests_total's label)
FINISH_REASONS = ("eos", "length", "aborted")
DEPENDENCIES = ("key_store", "cache", "glossary_store", "document_store")  # app.dependency: what requests need
LIMIT_REASONS = ("missing_key", "invalid_key", "req_limit", "char_limit", "daily_char_limit", "batch_limit")

disable_created_metrics()  # no extra *_created gauges beside the contract's series


class Metrics:
    """The server's metrics (names per the HTTP contract, base units, low-cardinality labels)."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.ttft = Histogram("mt_time_to_first_token_seconds", "Arrival to first token", buckets=LATENCY, registry=r)
        self.itl = Histogram(
            "mt_inter_token_latency_seconds", "Between tokens of a request", buckets=LATENCY, registry=r
        )
        self.queue_time = Histogram(
            "mt_request_queue_time_seconds", "Arrival to admission", buckets=LATENCY, registry=r
        )
        self.duration = Histogram("mt_request_duration_seconds", "Arrival to finish", buckets=LATENCY, registry=r)
        self.batch_size = Histogram("mt_batch_size", "Rows per decode step", buckets=BATCH, registry=r)
        self.step = Histogram("mt_step_duration_seconds", "Engine step time", ["phase"], buckets=LATENCY, registry=r)
        self.input_tokens = Histogram("mt_request_input_tokens", "Source tokens", buckets=TOKENS, registry=r)
        self.generated = Histogram("mt_request_generated_tokens", "Generated tokens", buckets=TOKENS, registry=r)
        live = {"registry": r, "multiprocess_mode": "livesum"}  # set by each engine core; cores add up
        self.running = Gauge("mt_requests_running", "Requests in decode batches", **live)
        self.waiting = Gauge("mt_requests_waiting", "Requests queued for admission", **live)
        self.cache_tokens = Gauge("mt_cache_tokens", "Tokens held in KV caches", **live)
        self.threads = Gauge("mt_core_threads", "Intra-op threads the engine cores run", **live)
        self.requests = Counter("mt_requests", "Finished requests", ["model", "finish_reason"], registry=r)
        self.failures = Counter("mt_request_failures", "Failed requests", ["error_type"], registry=r)
        self.input_total = Counter("mt_input_tokens", "Source tokens", registry=r)
        self.generated_total = Counter("mt_generated_tokens", "Generated tokens", registry=r)
        self.limit_rejections = Counter(
            "mt_limit_rejections", "Requests refused by API key or limit checks", ["reason"], registry=r
        )
        self.api_requests = Counter("mt_api_requests", "Requests per API dialect", ["dialect"], registry=r)
        self.cache_hits = Counter("mt_cache_hits", "Texts answered from the translation cache", registry=r)
        self.cache_misses = Counter("mt_cache_misses", "Cacheable texts the engine translated", registry=r)
        # 1 while every live HTTP worker can reach the dependency (the lowest of theirs)
        self.dependency_up = Gauge("mt_dependency_up", "Dependency reachable", ["dependency"], registry=r,
                                   multiprocess_mode="livemin")  # fmt: skip
        self.dependency_errors = Counter(
            "mt_dependency_errors", "Failed calls and probes of a dependency", ["dependency"], registry=r
        )
        self.worker_restarts = Counter("mt_worker_restarts", "HTTP workers started again after dying", registry=r)
        self.confidence_sentences = Counter(
            "mt_confidence_sentences", "Translated sentences served with a confidence", ["model"], registry=r
        )
        self.low_confidence = Counter(
            "mt_low_confidence_sentences", "Of those, sentences below the confidence threshold", ["model"], registry=r
        )
        self.glossary_retries = Counter(
            "mt_glossary_retries", "Texts decoded again to mend a glossary term", ["model", "reason"], registry=r
        )
        for kind in ERROR_TYPES:  # known series exist from the start, at 0
            self.failures.labels(kind)
        for reason in LIMIT_REASONS:
            self.limit_rejections.labels(reason)
        for name in DIALECTS:
            self.api_requests.labels(name)
        for name in DEPENDENCIES:
            self.dependency_errors.labels(name)

    def add_model(self, name: str) -> None:
        """Start a model's request counters at 0."""
        for reason in FINISH_REASONS:
            self.requests.labels(name, reason)
        self.confidence_sentences.labels(name)
        self.low_confidence.labels(name)
        for reason in RETRY_REASONS:
            self.glossary_retries.labels(name, reason)

    def render(self) -> bytes:
        """Prometheus text: this process's metrics, or every process's in multiprocess mode."""
        if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        return generate_latest(registry)


class Tally:
    """Observations of one histogram gathered in this process and added to it in one go (`push`): the engine core
    observes every decode step, and each Prometheus observation is a locked write to the metrics' shared files.
    prometheus_client has no public way to add n observations at once: `push` writes the histogram's own bucket and
    sum values (`_buckets`, `_sum`), which pyproject pins to the versions tests/app/test_metrics.py checks it on."""

    def __init__(self, histogram: Histogram):
        self.histogram = histogram
        self.bounds = upper_bounds(histogram)
        self.counts = [0] * len(self.bounds)
        self.sum = 0.0

    def observe(self, value: float, n: int = 1) -> None:
        """n observations of one value (every row of a decode step waited as long for its token)."""
        if n > 0:
            self.counts[bisect.bisect_left(self.bounds, value)] += n
            self.sum += value * n

    def push(self) -> None:
        """Add what was observed since the last push to the histogram."""
        if not any(self.counts):
            return
        self.histogram._sum.inc(self.sum)
        for bucket, n in zip(self.histogram._buckets, self.counts, strict=True):
            if n:
                bucket.inc(n)
        self.counts, self.sum = [0] * len(self.counts), 0.0


def upper_bounds(histogram: Histogram) -> list[float]:
    """The histogram's bucket bounds, +Inf last, as it exposes them (a bucket holds the values up to its bound)."""
    (family,) = histogram.collect()
    return [float(s.labels["le"]) for s in family.samples if s.name.endswith("_bucket")]
