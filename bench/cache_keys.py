"""What the translation cache and the key checks cost, over HTTP on the built-in model (CPU):

    python -m bench.cache_keys                  # SQLite keys; Redis too when redis-server is installed
    python -m bench.cache_keys --rounds 500

(1) Cache hit: p50 latency of a repeated 20-text list request (target <= 5 ms), next to the same request with the
    cache off (every text through the engine).
(2) Key + limit checks: p50 latency of POST /detect (no engine work) with keys required and every limit set, against
    the same server configuration with keys off (target: <= 0.5 ms more). Requests to the servers are interleaved.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.harness.server import RedisServer, ServerProcess, add_keys
from bench.machine import cpu_model

TEXTS = [f"The meeting number {i} starts at nine in the small room." for i in range(20)]
KEY = "bench-key"
HUGE = str(10**9)  # limits that are checked and counted on every request, never reached
LIMITS = ("--req-limit", HUGE, "--char-limit", HUGE, "--daily-char-limit", HUGE, "--batch-limit", "1000")


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def timed(client: httpx.Client, url: str, body: dict) -> float:
    """Seconds for one POST answered 200."""
    start = time.perf_counter()
    r = client.post(url, json=body)
    elapsed = time.perf_counter() - start
    assert r.status_code == 200, r.text
    return elapsed


def interleaved(targets: dict[str, tuple[str, dict]], rounds: int) -> dict[str, list[float]]:
    """Latencies per target, one request to each in turn, `rounds` times (after 20 warm-up rounds)."""
    out: dict[str, list[float]] = {name: [] for name in targets}
    with httpx.Client(timeout=120) as client:
        for i in range(rounds + 20):
            for name, (url, body) in targets.items():
                t = timed(client, url, body)
                if i >= 20:
                    out[name].append(t)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=300)
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-cache-keys-"))
    db = add_keys(tmp / "keys.sqlite", {KEY: {}})
    configs = {
        "cache on": ("--cache",),
        "cache off": ("--no-cache",),
        "keys off": ("--no-cache",),
        "keys sqlite": ("--no-cache", "--api-keys", "--keys-db", str(db), *LIMITS),
    }
    redis = RedisServer(tmp) if shutil.which("redis-server") else None
    servers = {name: ServerProcess(*flags, "--warmup-rounds", "1") for name, flags in configs.items()}
    if redis is not None:
        servers["keys redis"] = ServerProcess("--no-cache", "--api-keys", "--redis-url", redis.url, *LIMITS)
        import asyncio

        from app.keys.records import KeyRecord
        from app.keys.redis_store import RedisStore

        async def add() -> None:
            store = RedisStore(redis.url)
            await store.add(KEY, KeyRecord("bench"))
            await store.close()

        asyncio.run(add())
    try:
        for s in servers.values():
            s.wait()
        print(f"CPU: {cpu_model()}; {args.rounds} rounds, requests interleaved; the machine may be shared")
        listing = {"q": TEXTS, "source": "en", "target": "es"}
        cache = interleaved({n: (servers[n].url + "/translate", listing) for n in ("cache on", "cache off")}, 30)
        cache_hit = interleaved({"cache on": (servers["cache on"].url + "/translate", listing)}, args.rounds)
        hit, off = p50_ms(cache_hit["cache on"]), p50_ms(cache["cache off"])
        print(f"20-text list, cache hit:  p50 {hit:.2f} ms (target <= 5 ms)")
        print(f"20-text list, cache off:  p50 {off:.2f} ms (the engine translates every text; {off / hit:.0f}x)")
        keyed = [n for n in servers if n.startswith("keys")]
        detect = {n: (servers[n].url + "/detect", {"q": "Good morning, how are you?", "api_key": KEY}) for n in keyed}
        lat = interleaved(detect, args.rounds)
        base = p50_ms(lat["keys off"])
        for name in keyed:
            p50 = p50_ms(lat[name])
            print(f"POST /detect, {name:11s}: p50 {p50:.3f} ms ({p50 - base:+.3f} ms, {p50 / base:.2f}x vs keys off)")
    finally:
        for s in servers.values():
            s.stop()
        if redis is not None:
            redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
