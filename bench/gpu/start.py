"""The server's start on a device, first thing in a GPU check: seconds to ready, one translation, the log lines that
say what it sized and captured; on a timeout, the end of its log (`python -m bench.gpu.start MODEL [--device cpu]`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.harness.client import HTTP
from bench.harness.server import ServerProcess

SAID = ("dtype", "batch budget", "static decode step", "captured", "engine core", "torch threads", "error")


def start(model: Path, device: str, timeout: float) -> dict:
    """Start the server on `model` and `device`, wait for ready, translate once; what it took and said."""
    began = time.monotonic()
    server = ServerProcess("--model", str(model), "--device", device, "--dtype", "auto")
    try:
        server.wait(timeout=timeout)
        ready = time.monotonic() - began
        lang = next(x for x in HTTP.get(server.url + "/languages").json() if x["targets"])
        body = {"q": "Hello, world. How are you today?", "source": lang["code"], "target": lang["targets"][0]}
        sent = time.monotonic()
        answer = HTTP.post(server.url + "/translate", json=body, timeout=60)
        first = time.monotonic() - sent
        (card,) = HTTP.get(server.url + "/info").json()["models"]
    finally:
        server.stop()
    said = [line for line in server.log_path.read_text(errors="replace").splitlines() if any(w in line for w in SAID)]
    return {"ready_s": ready, "first_s": first, "status": answer.status_code, "text": answer.text[:200],
            "dtype": card["dtype"], "device": card["device"], "log": said}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Print what the start took; exit 1 when the translation failed (a timeout raises with the log's end)."""
    p = argparse.ArgumentParser(prog="python -m bench.gpu.start", description=__doc__.split("\n\n")[0])
    p.add_argument("model", type=Path, help="a native or Hugging Face checkpoint directory")
    p.add_argument("--device", default="cuda", help="the server's device (cuda)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for ready (120)")
    args = p.parse_args(argv)
    r = start(args.model, args.device, args.timeout)
    print(f"ready in {r['ready_s']:.1f} s on {r['device']} ({r['dtype']}); first translation {r['first_s']:.2f} s, "
          f"HTTP {r['status']}: {r['text']}")  # fmt: skip
    print("\n".join(r["log"]))
    return 0 if r["status"] == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
