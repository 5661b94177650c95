"""The engine core's process: build the core (app.engine.build), then serve the HTTP fronts over ZeroMQ (a ROUTER
socket; each front is a DEALER) until the launcher says stop or goes away."""

from __future__ import annotations

import logging
import os
import pickle
import signal
import time
from multiprocessing.connection import Connection

import torch
import zmq

from app.engine.build import build, pick_device
from app.engine.card import ModelCard
from app.engine.core import EngineCore
from app.engine.messages import Abort, Hello, Ready, Submit, Update, encode, to_core
from app.engine.threads import HUGE_PAGES, SPIN_COUNT, WAIT_POLICY, CpuShare, core_threads, cpu_share
from app.settings import Settings
from model.runner.host_memory import keep_freed_memory

log = logging.getLogger("mt.core")


def core_main(spec: str, settings: dict, address: str, stop: Connection) -> None:
    """A spawned core process: load, warm up, serve. A model that cannot load sends the launcher why, exits 1."""
    s = Settings(**settings)
    logging.basicConfig(level=s.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher drains the HTTP workers first, then stops the core
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    device = pick_device(s.device)
    log.info("host allocator: %s; torch's huge pages: %s", "freed memory kept for reuse" if keep_freed_memory()
             else "as the system has it", "on" if os.environ.get(HUGE_PAGES) == "1" else "off")  # fmt: skip
    threads, why_threads = core_threads()
    torch.set_num_threads(threads)
    share = cpu_share(threads, why_threads, torch.device(device).type)
    waits = next((f"{k}={os.environ[k]}" for k in (WAIT_POLICY, SPIN_COUNT) if k in os.environ), "OpenMP's default")
    log.info("torch threads: %d (%s%s); OpenMP waits: %s", threads, why_threads,
             ", fewer while other processes take the CPUs" if share else "", waits)  # fmt: skip
    try:
        core, card = build(spec, s, device)
    except Exception as exc:  # the launcher prints the reason and exits non-zero
        log.debug("model loading failed", exc_info=True)
        stop.send(f"model loading failed: {type(exc).__name__}: {exc}")
        raise SystemExit(1) from None
    log.info("engine core %s: serving %s", card.name, address)
    core.metrics.threads.set(threads)
    serve(core, card, address, stop.fileno(), share)


def serve(core: EngineCore, card: ModelCard, address: str, stop_fd: int, share: CpuShare | None = None) -> None:
    """Rounds of intake -> plan/execute -> one Update per front, until stop_fd turns readable (the launcher says
    stop, or it is gone); the torch threads follow `share` between rounds. A crash closes the socket unannounced, as
    a killed process would: fronts see it go."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    for option in (zmq.SNDHWM, zmq.RCVHWM, zmq.LINGER):
        sock.setsockopt(option, 0)  # no high-water mark: a message is never dropped
    sock.bind(address)
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    poller.register(stop_fd, zmq.POLLIN)
    ready = encode(Ready(pickle.dumps(card)))
    try:
        while True:
            wait = core.wait_s()
            if share is not None and wait != 0:
                share.idle()
            events = dict(poller.poll(None if wait is None else wait * 1000))
            if stop_fd in events:
                break
            if sock in events:
                intake(sock, core, ready)
            if core.wait_s() == 0:
                core.run_round()
                if share is not None:
                    follow(share, core)
            send(sock, core.flush())
        core.fail_all("the engine stopped")
        send(sock, core.flush())
    finally:
        sock.close(0)
        ctx.term()


def follow(share: CpuShare, core: EngineCore) -> None:
    """The torch threads the others' share of the CPUs leaves the core, once a busy window has measured it."""
    threads = share.busy(time.monotonic())
    if threads is not None:
        torch.set_num_threads(threads)
        core.metrics.threads.set(threads)
        took = f"other processes took {share.others:.1f} of the {len(share.cpus)} CPUs"
        log.info("torch threads: %d of %d (%s)", threads, share.most, took)


def intake(sock: zmq.Socket, core: EngineCore, ready: bytes) -> None:
    """Apply every message that has arrived."""
    while True:
        try:
            front, data = sock.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return
        msg = to_core.decode(data)
        if isinstance(msg, Submit):
            core.submit(front, msg)
        elif isinstance(msg, Abort):
            core.abort(front, msg.ids)
        elif isinstance(msg, Hello):
            sock.send_multipart([front, ready])


def send(sock: zmq.Socket, updates: dict[bytes, Update]) -> None:
    """One message per front."""
    for front, update in updates.items():
        sock.send_multipart([front, encode(update)])
