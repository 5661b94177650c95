"""Chaos soak: mixed requests with API keys (in Redis) while Redis is killed (-9) and restarted every 20 s and HTTP
workers are killed (-9), everything on 127.0.0.1, bounded in requests and in time.

    python -m bench.chaos                              # 20,000 requests on the built-in model; writes its section
    python -m bench.chaos --requests 2000 --no-write   # a quick check

The mix: JSON texts and lists (many repeated: the cache answers them), streams, /detect, DeepL's /v2/translate,
inline and stored glossaries; each client waits out a 503's Retry-After, as a polite client does. A probe sends a
request every 50 ms on a fresh connection. It passes when no request got a 500 or any answer but 200 or 503 with
Retry-After, none hung (30 s), every transport error came to a request in flight when a worker was killed, the probes
all succeeded from 2 s after each Redis restart, and nothing was left running in the engine at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bench.loadgen import percentile
from bench.machine import machine_info, machine_line
from bench.report import command, write_section

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Chaos soak (bench/chaos.py)"
KEY = "chaos-key-0123456789"
TEXTS = [
    "The house is big.", "Where is the station?", "Good morning.", "I would like a cup of coffee.",
    "The cat sleeps on the sofa.", "We are going to the beach tomorrow.", "Thank you very much.",
    "The train leaves at noon.", "My brother reads a book.", "It is raining today.", "Open the window, please.",
    "The children play in the park.",
]  # fmt: skip
TIMEOUT_S, PROBE_EVERY_S, BACK_WITHIN_S = 30.0, 0.05, 2.0


@dataclass
class Outcome:
    """One request: what it was, when it ran, and what came of it ("200", "503 unavailable", "reset", "hung"...)."""

    kind: str
    start: float
    end: float
    result: str


def requests_of(rng: random.Random, glossary_id: str) -> tuple[str, str, dict, dict]:
    """One request of the mix: (kind, path, JSON body, headers)."""
    text, short = rng.choice(TEXTS), {"max_new_tokens": 24}
    keyed = {"source": "en", "target": "es", "api_key": KEY, "parameters": short}
    kind = rng.choices(["text", "list", "stream", "detect", "deepl", "inline", "stored"], [40, 15, 15, 10, 10, 5, 5])[0]
    if kind == "list":
        return kind, "/translate", {"q": rng.sample(TEXTS, 3), **keyed}, {}
    if kind == "stream":
        return kind, "/translate", {"q": text, "stream": True, **keyed}, {}
    if kind == "detect":
        return kind, "/detect", {"q": text, "api_key": KEY}, {}
    if kind == "deepl":
        body = {"text": [text], "source_lang": "EN", "target_lang": "ES"}
        return kind, "/v2/translate", body, {"Authorization": f"DeepL-Auth-Key {KEY}"}
    if kind == "inline":
        return kind, "/translate", {"q": text, "glossary": {"house": "casa"}, **keyed}, {}
    if kind == "stored":
        return kind, "/translate", {"q": text, "glossary_id": glossary_id, **keyed}, {}
    return kind, "/translate", {"q": text, **keyed}, {}


def verdict(status: int, headers, text: str, stream: bool) -> str:
    """What an answer was: "200", "503 <error_type>" (with Retry-After), or what it should not have been."""
    if status == 200 and stream and "event: done" not in text:
        return "stream without done: " + (text.rsplit("event: ", 1)[-1][:80] if "event: " in text else "empty")
    if status == 200:
        return "200"
    try:
        body = json.loads(text)
    except ValueError:
        return f"{status} not JSON"
    what = body.get("error_type") or deepl_type(body.get("message", "?"))
    return f"{status} {what}" + ("" if status != 503 or "Retry-After" in headers else " without Retry-After")


def deepl_type(message: str) -> str:
    """The error_type of a DeepL-shaped error ({"message"}), from its words."""
    words = {"unavailable (": "unavailable", "not ready": "not_ready", "overloaded": "overloaded"}
    return next((kind for key, kind in words.items() if key in message), message[:40])


async def send(http: aiohttp.ClientSession, base: str, path: str, body: dict, headers: dict) -> tuple[str, float]:
    """Send one request on a fresh connection; (result, seconds to wait before the next: Retry-After on a 503)."""
    try:
        async with http.post(base + path, json=body, headers=headers) as r:
            text = await r.text()
            result = verdict(r.status, r.headers, text, bool(body.get("stream")))
            return result, float(r.headers.get("Retry-After", 0)) if r.status == 503 else 0.0
    except TimeoutError:
        return "hung", 0.0
    except (aiohttp.ClientError, OSError) as exc:
        return f"reset ({type(exc).__name__})", 0.0


async def client(base: str, todo: list[int], out: list[Outcome], rng: random.Random, glossary_id: str, stop) -> None:
    """Send requests until `todo` is empty or `stop` is set."""
    async with session() as http:
        while todo and not stop.is_set():
            todo.pop()
            kind, path, body, headers = requests_of(rng, glossary_id)
            start = time.monotonic()
            result, wait = await send(http, base, path, body, headers)
            out.append(Outcome(kind, start, time.monotonic(), result))
            await asyncio.sleep(min(wait, 5.0))


async def probe(base: str, out: list[Outcome], stop) -> None:
    """A keyed request every PROBE_EVERY_S on a fresh connection (the service seen from outside)."""
    body = {"q": TEXTS[0], "source": "en", "target": "es", "api_key": KEY}
    async with session(timeout=5.0) as http:
        while not stop.is_set():
            start = time.monotonic()
            result, _ = await send(http, base, "/translate", body, {})
            out.append(Outcome("probe", start, time.monotonic(), result))
            await asyncio.sleep(max(0.0, PROBE_EVERY_S - (time.monotonic() - start)))


def session(timeout: float = TIMEOUT_S) -> aiohttp.ClientSession:
    """A session whose every request opens its own connection (none outlives a killed worker unused)."""
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout))


class Chaos(threading.Thread):
    """The faults, on a schedule from `t0`: Redis killed every `every` s and started `down` s later; a random HTTP
    worker killed at each of `worker_kills` s. `faults` records (time, what)."""

    def __init__(self, server, redis, every: float, down: float, worker_kills: list[float]):
        super().__init__(daemon=True)
        self.server, self.redis, self.every, self.down = server, redis, every, down
        self.plan = sorted([(every * k, "redis killed") for k in range(1, 1000)] + [(t, "worker killed")
                            for t in worker_kills])  # fmt: skip
        self.faults: list[tuple[float, str]] = []
        self.replaced: list[float] = []  # seconds from each worker kill to its replacement's pid
        self.halt = threading.Event()

    def run(self) -> None:
        t0 = time.monotonic()
        for at, what in self.plan:
            if self.halt.wait(max(0.0, t0 + at - time.monotonic())):
                return
            if what == "redis killed":
                self.faults.append((time.monotonic(), what))
                self.redis.kill()
                if self.halt.wait(self.down):
                    break
                self.redis.start()
                self.faults.append((time.monotonic(), "redis restarted"))
            else:
                self.kill_worker()
        self.halt.wait()

    def kill_worker(self) -> None:
        """kill -9 of one HTTP worker; note how long until the launcher started another."""
        before = self.server.processes()[1]
        killed = time.monotonic()
        self.faults.append((killed, "worker killed"))
        os.kill(random.choice(before), signal.SIGKILL)
        while not (set(self.server.processes()[1]) - set(before)) and time.monotonic() - killed < 30:
            time.sleep(0.02)
        self.replaced.append(time.monotonic() - killed)

    def stop(self) -> None:
        """Stop the schedule; Redis left running."""
        self.halt.set()
        self.join()
        if self.redis.proc.poll() is not None:
            self.redis.start()


async def run(base: str, args: argparse.Namespace, glossary_id: str, chaos: Chaos) -> tuple[list, list, float]:
    """The clients and the probe while the faults run; (outcomes, probes, wall seconds)."""
    stop, todo, outs, probes = asyncio.Event(), list(range(args.requests)), [], []
    asyncio.get_running_loop().call_later(args.max_seconds, stop.set)  # the time bound
    start = time.monotonic()
    chaos.start()
    prober = asyncio.create_task(probe(base, probes, stop))
    rngs = [random.Random(args.seed * 1000 + i) for i in range(args.clients)]
    await asyncio.gather(*(client(base, todo, outs, rng, glossary_id, stop) for rng in rngs))
    wall = time.monotonic() - start
    stop.set()
    await prober
    chaos.stop()
    return outs, probes, wall


def recoveries(faults: list[tuple[float, str]], probes: list[Outcome]) -> list[tuple[str, float]]:
    """After each Redis restart and each worker kill: seconds until every probe got 200 (the probes that ended before
    the next fault)."""
    out = []
    for i, (at, what) in enumerate(faults):
        if what == "redis killed":
            continue
        until = faults[i + 1][0] if i + 1 < len(faults) else float("inf")
        failed = [p.end for p in probes if at <= p.start and p.end < until and p.result != "200"]
        out.append((what, max(failed) - at if failed else 0.0))
    return out


def at_a_kill(o: Outcome, kills: list[float]) -> bool:
    """The request was in flight when a worker was killed."""
    return any(o.start <= k <= o.end + 0.05 for k in kills)


def report(args, outs: list[Outcome], probes: list[Outcome], chaos: Chaos, wall: float, left: float, log: str):
    """The markdown section and whether the soak passed."""
    results = Counter(o.result if not o.result.startswith("reset") else "reset" for o in outs)
    kills = [t for t, what in chaos.faults if what == "worker killed"]
    resets = [o for o in outs if o.result.startswith("reset")]
    stray = [o for o in resets if not at_a_kill(o, kills)]
    allowed = {"200", "503 unavailable", "503 not_ready", "503 overloaded"}
    bad = {r: n for r, n in results.items() if r not in allowed | {"reset"}}
    back = recoveries(chaos.faults, probes)
    redis_back = [s for what, s in back if what == "redis restarted"]
    worker_back = [s for what, s in back if what == "worker killed"]
    served = [o.end - o.start for o in outs if o.result == "200"]
    outages = sum(what == "redis killed" for _, what in chaos.faults)
    passed = not bad and not stray and left == 0 and all(s <= BACK_WITHIN_S for s in redis_back)
    passed = passed and results["hung"] == 0 and len(kills) == len(args.worker_kills)
    info = machine_info()
    fmt = lambda xs: ", ".join(f"{x:.2f}" for x in xs) or "none"  # noqa: E731
    lines = [
        SECTION,
        "",
        f"Generated by `{command('bench.chaos')}` on {info['date']}.",
        "",
        machine_line(info)[:-1] + f"; load average (1 min) {info['load']} at the end (the load generator shares it).",
        f"- Server: the built-in en-es model, `--workers 2 --api-keys --redis-url ... --cache` (store budget "
        f"{args.store_timeout:g} s); {args.clients} clients, each on fresh connections, waiting out Retry-After.",
        f"- {len(outs)} requests in {wall:.0f} s ({len(outs) / wall:.0f}/s); mix: "
        + ", ".join(f"{k} {n}" for k, n in sorted(Counter(o.kind for o in outs).items()))
        + ".",
        f"- Faults: Redis killed {outages} times (every {args.every:g} s, "
        f"down {args.down:g} s each); a worker killed {len(kills)} times (replaced, new pid after "
        f"{fmt(chaos.replaced)} s).",
        "- Answers: "
        + ", ".join(f"{r}: {n}" for r, n in results.most_common())
        + f"; resets all at a worker's kill: {'yes' if not stray else f'**no, {len(stray)} not**'}"
        + f"; bad answers: {bad or 'none'}; hung (over {TIMEOUT_S:g} s): {results['hung']}.",
        f"- Served latency: p50 {percentile(served, 50):.3f} s, p99 {percentile(served, 99):.3f} s, "
        f"max {max(served, default=0):.2f} s.",
        f"- Back after each Redis restart (every probe 200 from then on; {len(probes)} probes, one per "
        f"{PROBE_EVERY_S * 1000:.0f} ms): {fmt(redis_back)} s (max {max(redis_back, default=0):.2f} s; "
        f"limit {BACK_WITHIN_S:g} s). After each worker kill: {fmt(worker_back)} s.",
        f"- Server log: {log.count('key store unavailable:')} 'key store unavailable' lines and "
        f"{log.count('key store is back')} 'is back' lines for {outages} Redis outages ({outages - len(redis_back)} "
        f"ended after the load), one each per worker that saw it; {left:.0f} requests left in the engine at the end.",
        f"- Verdict: {'passed' if passed else '**failed**'}.",
        "",
    ]
    return "\n".join(lines), passed


def make_glossary(base: str) -> str:
    """A stored glossary of the key; its id."""
    from bench.harness.client import HTTP

    fields = {"name": "chaos", "source": "en", "target": "es", "entries": "house\tcasa", "api_key": KEY}
    r = HTTP.post(base + "/glossaries", json=fields, timeout=30)
    assert r.status_code == 201, r.text
    return r.json()["glossary_id"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=20_000, help="requests in all (20000)")
    p.add_argument("--max-seconds", type=float, default=540.0, help="stop sending after this long (540)")
    p.add_argument("--clients", type=int, default=16, help="concurrent clients (16)")
    p.add_argument("--every", type=float, default=20.0, help="seconds between Redis kills (20)")
    p.add_argument("--down", type=float, default=5.0, help="seconds Redis stays down each time (5)")
    p.add_argument("--worker-kills", type=lambda s: [float(x) for x in s.split(",")], default=[30.0, 70.0],
                   help="seconds after the start at which a worker is killed (30,70)")  # fmt: skip
    p.add_argument("--store-timeout", type=float, default=2.0, help="the server's --store-timeout-seconds (2)")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the chaos soak; exit 1 when it did not pass."""
    from bench.harness.server import RedisServer, ServerProcess, add_keys
    from bench.soak import leftover
    from bench.workload import DEFAULT_MODEL

    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_chaos_") as tmp:
        redis = RedisServer(Path(tmp), durable=True)
        add_keys(redis.url, {KEY: {}})
        flags = ["--model", str(DEFAULT_MODEL), "--workers", "2", "--api-keys", "--redis-url", redis.url, "--cache"]
        server = ServerProcess(*flags, "--store-timeout-seconds", str(args.store_timeout)).wait(timeout=600)
        try:
            chaos = Chaos(server, redis, args.every, args.down, args.worker_kills)
            outs, probes, wall = asyncio.run(run(server.url, args, make_glossary(server.url), chaos))
            left = leftover(server.url)
        finally:
            server.stop()
            redis.stop()
    section, passed = report(args, outs, probes, chaos, wall, left, server.log_path.read_text(errors="replace"))
    print(section)
    if not args.no_write:
        write_section(args.out, section)
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
