"""Soak: many mixed requests against one server, every answer checked, the server's memory sampled.

    python -m bench.soak                      # 50,000 requests on the built-in model; writes its section
    python -m bench.soak --requests 2000 --no-write      # a quick check

The mix: JSON (single texts, lists, beams with alternatives), streams (greedy, seeded sampling), bad inputs (empty,
unknown language, bad parameter, broken JSON, too long) and clients that drop their stream after two events.
Each kind of request is first sent alone; every later answer must equal that one (batching changes nothing),
every stream must add up to its done event, every bad input must get its error. Lost = no answer or a transport
error. The resident memory of the server's processes is sampled throughout: after warm-up it must stay flat.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import aiohttp

from bench.harness.procs import has_torch, rss_mb
from bench.loadgen import session, split, spread
from bench.machine import machine_info, machine_line
from bench.report import command, write_section
from bench.workload import model_dir

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Soak (bench/soak.py)"
TEXTS = ["The house is big.", "Where is the station?", "I would like a cup of coffee, please.", "Good morning."]
LONG = " ".join(["word"] * 400)


def kinds() -> list[tuple[str, dict | str, int]]:
    """(name, body, expected status); a str body is sent raw (broken JSON)."""
    b = lambda q, **extra: {"q": q, "source": "en", "target": "es", **extra}
    short = {"max_new_tokens": 24}
    return [
        *[(f"json{i}", b(t, parameters=short), 200) for i, t in enumerate(TEXTS)],
        ("json-list", b(TEXTS, parameters=short), 200),
        ("beam", b(TEXTS[2], alternatives=1, parameters={"beam_size": 3, **short}), 200),
        *[(f"stream{i}", b(t, stream=True, parameters=short), 200) for i, t in enumerate(TEXTS[:2])],
        ("stream-sampled", b(TEXTS[3], stream=True, parameters={"temperature": 1.2, "seed": 7, **short}), 200),
        ("drop", b(TEXTS[1], stream=True, parameters={"max_new_tokens": 200, "min_new_tokens": 200}), 0),
        ("empty", b(""), 422),
        ("language", {"q": "x", "source": "en", "target": "zz"}, 400),
        ("parameter", b("x", parameters={"top_p": 3}), 422),
        ("broken", "{", 422),
        ("long", b(LONG), 422),
    ]


async def answer(http: aiohttp.ClientSession, url: str, body: dict | str) -> tuple[int, str]:
    """(status, what to compare): the translation (a stream's tokens must add up to its done event) or error_type."""
    raw = body if isinstance(body, str) else json.dumps(body)
    async with http.post(url, data=raw, headers={"content-type": "application/json"}) as r:
        text = await r.text()
    if r.status != 200:
        return r.status, json.loads(text)["error_type"]
    if not (isinstance(body, dict) and body.get("stream")):
        return 200, json.dumps(json.loads(text)["translatedText"])
    tokens, done = "", None
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if lines.get("event") == "token":
            tokens += json.loads(lines["data"])["token"]["text"]
        elif lines.get("event") in ("done", "error"):
            done = json.loads(lines["data"])
    if done is None or "translatedText" not in done or done["translatedText"] != tokens:
        return 200, f"broken stream: {tokens!r} / {done!r}"
    return 200, json.dumps(done["translatedText"])


async def drop(http: aiohttp.ClientSession, url: str, body: dict) -> None:
    """Read two events of a long stream, then go away."""
    async with http.post(url, json=body) as r:
        events = 0
        async for line in r.content:
            events += line.startswith(b"event:")
            if events == 2:
                return


async def client(url: str, plan: list[int], expected: dict[int, tuple[int, str]], clients: int) -> dict:
    """Send the planned kinds with `clients` concurrent connections; count ok / wrong / lost per kind."""
    table, counts, todo = kinds(), Counter(), iter(plan)
    wrong: list[str] = []
    async with session(clients, 120) as http:

        async def worker() -> None:
            for k in todo:
                name, body, status = table[k]
                try:
                    if name == "drop":
                        await drop(http, url, body)
                        counts["ok"] += 1
                        continue
                    got = await answer(http, url, body)
                except (aiohttp.ClientError, TimeoutError, ValueError, KeyError) as exc:
                    counts["lost"] += 1
                    wrong.append(f"{name}: {type(exc).__name__}")
                    continue
                ok = got == expected[k] and got[0] == status
                counts["ok" if ok else "wrong"] += 1
                if not ok:
                    wrong.append(f"{name}: {got} != {expected[k]}")

        await asyncio.gather(*(worker() for _ in range(clients)))
    return {"counts": dict(counts), "wrong": wrong[:5]}


def references(url: str) -> dict[int, tuple[int, str]]:
    """Every kind's answer when sent alone."""

    async def run() -> dict[int, tuple[int, str]]:
        async with session(1, 120) as http:
            return {k: await answer(http, url, body) for k, (name, body, _) in enumerate(kinds()) if name != "drop"}

    return asyncio.run(run())


class Sampler(threading.Thread):
    """Samples the server's resident memory (MB) every `every` seconds: all its processes, and by role."""

    def __init__(self, pid: int, every: float):
        super().__init__(daemon=True)
        self.pid, self.every, self.samples = pid, every, []
        self.roles: list[dict[str, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.every):
            by_pid = rss_mb(self.pid)
            self.samples.append((time.monotonic(), sum(by_pid.values())))
            roles: dict[str, float] = {}
            for pid, mb in by_pid.items():
                role = role_of(pid, self.pid)
                roles[role] = roles.get(role, 0.0) + mb
            self.roles.append(roles)


def role_of(pid: int, launcher: int) -> str:
    """ "launcher", "engine core" (the processes that mapped torch) or "http workers"."""
    if pid == launcher:
        return "launcher"
    return "engine core" if has_torch(pid) else "http workers"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, help="model dir (default: the built-in en-es)")
    p.add_argument("--tiny", action="store_true", help="a random tiny model")
    p.add_argument("--requests", type=int, default=50_000, help="requests in all (50000)")
    p.add_argument("--clients", type=int, default=32, help="concurrent clients (32)")
    p.add_argument("--client-procs", type=int, default=2, help="load generator processes (2)")
    p.add_argument("--workers", type=int, default=1, help="server HTTP workers (1)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--sample-every", type=float, default=2.0, help="seconds between memory samples (2)")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def leftover(base: str, timeout: float = 10.0) -> float:
    """Requests still running or waiting once the load is over (0 unless rows leak), after up to `timeout` s."""
    from bench.harness.client import metrics, value

    deadline, left = time.monotonic() + timeout, 0.0
    while time.monotonic() < deadline:
        m = metrics(base)
        left = value(m, "mt_requests_running") + value(m, "mt_requests_waiting")
        if left == 0:
            break
        time.sleep(0.2)
    return left


def by_role(roles: list[dict[str, float]]) -> str:
    """Each role's resident memory at the start, after the first tenth and at the end (MB)."""
    if not roles:
        return "no samples"
    warm = roles[len(roles) // 10]
    names = sorted({name for r in roles for name in r})
    at = lambda r, name: f"{r.get(name, 0.0):.0f}"
    return "; ".join(f"{n} {at(roles[0], n)} / {at(warm, n)} / {at(roles[-1], n)}" for n in names)


def report(
    args, samples: list[tuple[float, float]], roles: list[dict[str, float]], outs: list[dict], wall: float, left: float
) -> tuple[str, bool]:
    """The markdown section and whether the soak passed (nothing lost or wrong)."""
    counts = sum((Counter(o["counts"]) for o in outs), Counter())
    wrong = [w for o in outs for w in o["wrong"]]
    mb = [m for _, m in samples] or [0.0]
    warm = mb[len(mb) // 10] if len(mb) > 10 else mb[0]
    half = mb[len(mb) // 2 :]
    growth = half[-1] - half[0] if half else 0.0
    passed = counts["lost"] == 0 and counts["wrong"] == 0 and left == 0
    info = machine_info()
    lines = [
        SECTION,
        "",
        f"Generated by `{command('bench.soak')}` on {info['date']}.",
        "",
        machine_line(info)[:-1] + f"; load average (1 min) {info['load']} at the end (the load generator shares it).",
        f"- {args.requests} requests in {wall:.0f} s ({args.requests / wall:.0f}/s) from {args.clients} clients in "
        f"{args.client_procs} processes; server `--workers {args.workers}`, device {args.device}.",
        f"- Answers: {counts['ok']} right, {counts['wrong']} wrong, {counts['lost']} lost"
        + (f" (first: {'; '.join(wrong)})" if wrong else "")
        + f"; {left:.0f} requests left running or waiting afterwards.",
        f"- Server resident memory (all its processes), {len(mb)} samples: {mb[0]:.0f} MB at the start, {warm:.0f} MB "
        f"after the first tenth, {max(mb):.0f} MB at most, {mb[-1]:.0f} MB at the end; {growth:+.0f} MB over the "
        f"second half: {'flat' if growth < max(10.0, 0.03 * warm) else '**still rising**'} (flat: under 3% or 10 MB).",
        f"- By process, MB at the start / after the first tenth / at the end: {by_role(roles)}.",
        "",
    ]
    return "\n".join(lines), passed


def main(argv: list[str] | None = None) -> int:
    """Run the soak; exit 1 when anything was lost or wrong."""
    from bench.harness.server import ServerProcess

    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_soak_") as tmp:
        path = model_dir(args, Path(tmp))
        flags = ["--model", str(path), "--device", args.device, "--workers", str(args.workers), "--max-queue", "100000"]
        server = ServerProcess(*flags, "--log-level", "warning").wait(timeout=600)
        try:
            url = server.url + "/translate"
            expected = references(url)
            plan = [k for k in range(len(kinds())) for _ in range(args.requests // len(kinds()) + 1)][: args.requests]
            random.Random(args.seed).shuffle(plan)
            counts, starts = split(len(plan), args.client_procs), [0]
            for n in counts:
                starts.append(starts[-1] + n)
            shares = [
                (url, plan[s : s + n], expected, max(1, args.clients // args.client_procs))
                for s, n in zip(starts, counts, strict=False)
            ]
            sampler = Sampler(server.proc.pid, args.sample_every)
            sampler.start()
            t0 = time.monotonic()
            outs, _ = spread(client, shares)
            wall = time.monotonic() - t0
            sampler.stop.set()
            left = leftover(server.url)
        finally:
            server.stop()
    section, passed = report(args, sampler.samples, sampler.roles, outs, wall, left)
    print(section)
    if not args.no_write:
        write_section(args.out, section)
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
