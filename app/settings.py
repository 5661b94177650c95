"""Service settings: environment variables with prefix MT_, overridable by command-line flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

import model
from model import confidence

BUILTIN = Path(model.__file__).parent / "builtin" / "en-es"  # served when no model is given


class Settings(BaseSettings):
    """Knobs of the server (not of the network: that is the checkpoint's config)."""

    model_config = SettingsConfigDict(env_prefix="MT_", env_nested_delimiter="__")

    host: str = "127.0.0.1"
    port: int = 8000
    models: Annotated[list[str], NoDecode] = Field(default_factory=list, description="pair=DIR, DIR or a hub model id")
    workers: int = Field(1, ge=1, description="HTTP worker processes, all served by one engine core per model")
    device: str = "auto"
    dtype: Literal["auto", "float32", "float16", "bfloat16", "int8", "int8-ffn"] = Field(
        "auto", description="auto: bf16 (else fp16) on CUDA, float32 on CPU; int8-ffn "
        "(dynamic int8 in the decoder's inner feed-forward layers) and int8 (every linear layer: faster still, changes "
        "more greedy outputs) are CPU only, and an output can depend on its batch"
    )  # fmt: skip
    max_batch_size: int = Field(64, ge=1, description="requests decoded together")
    max_batch_rows: int | None = Field(
        None, ge=1, description="rows decoded together (a beam request takes one per beam); default: on CPU "
        "max_batch_size x max_beam_size; on CUDA as many static rows as fit in the memory gpu_memory_utilization "
        "leaves after the weights, at most max_batch_size x max_beam_size"
    )  # fmt: skip
    max_batch_tokens: int | None = Field(
        None, ge=1, description="cache budget: reserved tokens, the source once plus beams x max_new_tokens per "
        "request; default: what the rows can use, max_batch_size x max_input_tokens + rows x max_new_tokens, on CPU "
        "within half the memory available at start-up"
    )  # fmt: skip
    gpu_memory_utilization: float = Field(
        0.9, gt=0, le=1, description="CUDA: share of the device's memory the server may use; the static cache takes "
        "what is free of it after the weights (as vLLM's setting of that name)"
    )  # fmt: skip
    max_prefill_tokens: int = Field(4096, ge=1, description="source tokens encoded per step (protects running rows)")
    max_wait_ms: float | None = Field(
        None, ge=0, description="gather arrivals this long when idle, so that they start as one batch; default 2 on "
        "CUDA and 0 on CPU, where a lone request would wait as long as a decode step and a late one joins after one"
    )  # fmt: skip
    join_overhead: float | None = Field(
        None, gt=0, le=1, description="while rows run, new requests join once the decoding since the last join took "
        "at least that join's time / this share (0.1: joins cost at most about 10%; 1: join every step); "
        "default 0.1 on CUDA, where a join costs about a decode step, and 1 on CPU"
    )  # fmt: skip
    max_join_wait_ms: float = Field(20.0, ge=0, description="... or once this long has passed since the last join")
    max_queue: int = Field(256, ge=0, description="waiting requests before 503 overloaded")
    max_input_tokens: int = Field(256, ge=1)
    max_items: int = Field(64, ge=1, description="texts per request")
    max_new_tokens: int = Field(512, ge=1, description="limit on parameters.max_new_tokens")
    default_max_new_tokens: int = Field(256, ge=1)
    max_beam_size: int = Field(8, ge=1)
    max_body_bytes: int = Field(1_000_000, ge=1)
    drain_seconds: float = Field(30.0, ge=0)
    max_worker_deaths: int = Field(
        5, ge=1, description="an HTTP worker that dies this many times within worker_death_window_seconds stops the "
        "server (exit 1); the launcher starts it again after fewer deaths (1: any death stops the server)"
    )  # fmt: skip
    worker_death_window_seconds: float = Field(60.0, gt=0, description="the window of max_worker_deaths")
    write_timeout_seconds: float = Field(
        30.0, gt=0, description="a response whose client takes none of its data for this long is aborted: its "
        "connection closed, its engine rows out of the batch (a client that stopped reading a stream)"
    )  # fmt: skip
    keepalive_seconds: float = Field(15.0, gt=0)
    warmup_rounds: int = Field(2, ge=0)
    cuda_graphs: bool = Field(True, description="CUDA: replay the static-shape decode step as CUDA graphs")
    overlap: bool | None = Field(
        None, description="launch each decode step before reading the previous one back, so that the host's work "
        "hides behind the device's (greedy, sampled and beam rows alike); default on on CUDA, off on CPU"
    )  # fmt: skip
    api_keys: bool = Field(False, description="require an API key (python -m app keys add) to translate or detect")
    keys_db: str = Field("mt-data/keys.sqlite", description="SQLite file of keys and limit counters (no redis_url)")
    redis_url: str | None = Field(None, description="redis://host:port/db: keys, limit counters and the cache")
    store_timeout_seconds: float = Field(
        2.0, gt=0, description="budget of each call to the key, glossary, cache or document store (Redis or SQLite, "
        "whose busy timeout it is too): past it the request gets 503 unavailable (the cache: a miss)"
    )  # fmt: skip
    req_limit: int = Field(-1, ge=-1, description="requests per minute per key (per client address without keys)")
    char_limit: int = Field(-1, ge=-1, description="characters per request (all texts of q); -1: no limit")
    daily_char_limit: int = Field(-1, ge=-1, description="characters per UTC day per key or client address")
    batch_limit: int = Field(-1, ge=-1, description="texts per request (max_items still applies); -1: no limit")
    glossary_max_entries: int = Field(1000, ge=1, description="entries of one glossary (stored, inline, or both)")
    glossary_max_entry_bytes: int = Field(1024, ge=2, description="UTF-8 bytes of one entry (source + target term)")
    glossary_max_bytes: int = Field(256_000, ge=2, description="UTF-8 bytes of all the terms of one glossary")
    cache: bool = Field(True, description="serve repeated translations from the translation cache")
    cache_bytes: int = Field(64 << 20, ge=0, description="in-process translation cache size (LRU) in bytes")
    cache_ttl_seconds: int = Field(7 * 86400, ge=1, description="lifetime of translation cache entries in Redis")
    max_file_bytes: int = Field(10_000_000, ge=1, description="POST /translate_file: size of the uploaded file")
    max_unzipped_bytes: int = Field(100_000_000, ge=1, description="zip-based files: uncompressed size of all entries")
    max_zip_entries: int = Field(2000, ge=1, description="zip-based files: entries in the archive")
    max_segments: int = Field(5000, ge=1, description="segments (paragraphs, cells, cues, entries) of one file")
    max_file_chars: int = Field(1_000_000, ge=1, description="characters to translate in one file")
    file_ttl_seconds: float = Field(3600.0, gt=0, description="how long a translated file can be downloaded")
    files_dir: str = Field("", description="where translated files wait for download (default: a temp folder)")
    confidence: bool = Field(
        True, description="give every translation a confidence in [0, 1] (details.confidence; calibrated: about that "
        "share of outputs at each value reach chrF 40), from signals the decode step records (greedy, sampled) or "
        "the beam's score"
    )  # fmt: skip
    confidence_threshold: float = Field(
        0.5, ge=0, le=1, description="below it a sentence is low-confidence: marked on the page, `fuzzy` in .po, "
        "needs-review-translation in XLIFF, counted in mt_low_confidence_sentences_total; a request's "
        "parameters.confidence_threshold (or the file's confidence_threshold) overrides it"
    )  # fmt: skip
    confidence_file: str = Field(
        "", description="a calibration (python -m model.calibrate) for every served model (FILE), or per model "
        "(NAME=FILE,NAME=FILE); default: the model's own confidence.json, else a mapping of the mean log-probability"
    )  # fmt: skip
    log_level: str = "info"

    @field_validator("confidence_file")
    @classmethod
    def _calibrations(cls, value: str) -> str:
        """Every calibration file parses (a start-up error naming the file and what is wrong)."""
        for path in confidence_paths(value).values():
            confidence.load(path)  # CalibrationError is a ValueError: pydantic names the setting
        return value

    @property
    def confidence_files(self) -> dict[str, str]:
        """Calibration files by model name ("*": every model)."""
        return confidence_paths(self.confidence_file)

    @field_validator("models", mode="before")
    @classmethod
    def _split_list(cls, value: object) -> object:
        """Environment lists: a JSON array or comma-separated values."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]


def confidence_paths(value: str) -> dict[str, str]:
    """confidence_file's files by model name: "FILE" -> {"*": FILE}; "a=F1,b=F2" -> {"a": F1, "b": F2}."""
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if len(parts) == 1 and "=" not in parts[0]:
        return {"*": parts[0]}
    out = {}
    for part in parts:
        name, sep, path = part.partition("=")
        if not (sep and name.strip() and path.strip()):
            raise ValueError(f"{part!r}: expected NAME=FILE (or one FILE for every model)")
        out[name.strip()] = path.strip()
    return out
