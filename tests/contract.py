"""Names the HTTP contract (docs/api.md) fixes, shared by the tests that check them."""

HISTOGRAMS = (
    "mt_time_to_first_token_seconds",
    "mt_inter_token_latency_seconds",
    "mt_request_queue_time_seconds",
    "mt_request_duration_seconds",
    "mt_batch_size",
    "mt_step_duration_seconds",
    "mt_request_input_tokens",
    "mt_request_generated_tokens",
)
LOAD_GAUGES = ("mt_requests_running", "mt_requests_waiting", "mt_cache_tokens")  # the engines' load
GAUGES = (*LOAD_GAUGES, "mt_dependency_up", "mt_core_threads")
COUNTERS = (
    "mt_requests_total",
    "mt_request_failures_total",
    "mt_input_tokens_total",
    "mt_generated_tokens_total",
    "mt_limit_rejections_total",  # keys and limits, the translation cache
    "mt_cache_hits_total",
    "mt_cache_misses_total",
    "mt_api_requests_total",  # requests per API dialect (LibreTranslate, DeepL)
    "mt_dependency_errors_total",  # failed calls and probes of the key, glossary, cache and document stores
    "mt_worker_restarts_total",  # HTTP workers the launcher started again
    "mt_confidence_sentences_total",  # translated sentences served with a confidence, per model
    "mt_low_confidence_sentences_total",  # those below the confidence threshold, per model
    "mt_glossary_retries_total",  # texts decoded again to mend a glossary term, per model and reason
)
