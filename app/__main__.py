"""`python -m app`: serve the models (engine cores + HTTP workers); flags override MT_* settings; SIGTERM drains."""

from __future__ import annotations

import argparse
import logging
import sys

from pydantic import ValidationError

from app.launcher import launch
from app.settings import Settings

FLAGS = {
    "workers": int,
    "max_batch_size": int,
    "max_batch_rows": int,
    "max_batch_tokens": int,
    "gpu_memory_utilization": float,
    "max_prefill_tokens": int,
    "max_wait_ms": float,
    "join_overhead": float,
    "max_join_wait_ms": float,
    "max_queue": int,
    "max_input_tokens": int,
    "max_items": int,
    "max_new_tokens": int,
    "default_max_new_tokens": int,
    "max_beam_size": int,
    "max_body_bytes": int,
    "drain_seconds": float,
    "max_worker_deaths": int,
    "worker_death_window_seconds": float,
    "write_timeout_seconds": float,
    "keepalive_seconds": float,
    "warmup_rounds": int,
    "keys_db": str,
    "redis_url": str,
    "store_timeout_seconds": float,
    "req_limit": int,
    "char_limit": int,
    "daily_char_limit": int,
    "batch_limit": int,
    "glossary_max_entries": int,
    "glossary_max_entry_bytes": int,
    "glossary_max_bytes": int,
    "cache_bytes": int,
    "cache_ttl_seconds": int,
    "max_file_bytes": int,
    "max_unzipped_bytes": int,
    "max_zip_entries": int,
    "max_segments": int,
    "max_file_chars": int,
    "file_ttl_seconds": float,
    "files_dir": str,
    "confidence_threshold": float,
    "confidence_file": str,
}
SWITCHES = {
    "cuda_graphs": "on CUDA, capture the static-shape decode step as CUDA graphs at start-up and replay them "
    "(default on)",
    "overlap": "launch each decode step before reading the previous one back (default on on CUDA, off on CPU)",
    "api_keys": "require an API key on /translate, /detect and /translate_file (keys: python -m app keys add)",
    "cache": "serve repeated translations from the translation cache (default on)",
    "confidence": "give every translation a calibrated confidence (details.confidence; default on)",
}


def parse_args(argv: list[str] | None = None) -> dict:
    """Flags given on the command line (unset ones fall back to MT_* settings)."""
    p = argparse.ArgumentParser(prog="python -m app", description=__doc__)
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--model", dest="models", action="append", help="SRC-TGT=DIR, DIR or hub id (repeatable)")
    p.add_argument("--device", help="auto, cpu, cuda, cuda:1 ...")
    p.add_argument(
        "--dtype",
        choices=["auto", "float32", "float16", "bfloat16", "int8", "int8-ffn"],
        help="auto: bfloat16 (else float16) on CUDA, float32 on CPU; int8-ffn = dynamic int8 in the decoder's inner "
        "feed-forward layers, int8 = in every linear layer "
        "(CPU only; int8 is faster still but changes more greedy outputs)",
    )
    p.add_argument("--log-level")
    for name, doc in SWITCHES.items():
        p.add_argument("--" + name.replace("_", "-"), action=argparse.BooleanOptionalAction, help=doc)
    for name, kind in FLAGS.items():
        p.add_argument("--" + name.replace("_", "-"), type=kind)
    return {k: v for k, v in vars(p.parse_args(argv)).items() if v is not None}


def main(argv: list[str] | None = None) -> int:
    """Launch the engine cores and the HTTP workers with the settings (or run `keys ...`); the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["keys"]:
        from app.keys.cli import main as keys_main

        return keys_main(argv[1:])
    try:
        settings = Settings(**parse_args(argv))
    except ValidationError as exc:  # a start-up error naming each setting and what is wrong with it
        print(f"invalid settings: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return launch(settings)


if __name__ == "__main__":
    raise SystemExit(main())
