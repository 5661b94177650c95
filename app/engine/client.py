"""A front's connection to one engine core (asyncio, a ZeroMQ DEALER): submit jobs, abort units, and hand each
Update's tokens and results to the jobs that wait for them. If the core goes away, everything in flight fails."""

from __future__ import annotations

import asyncio
import itertools
import logging
import pickle
from typing import Protocol

import zmq
from zmq.utils.monitor import recv_monitor_message

from app.engine.card import ModelCard
from app.engine.messages import Abort, Hello, Ready, Result, Submit, Update, WireUnit, encode, to_front
from model.runner.params import DecodeParams

log = logging.getLogger("mt.client")
GONE = "the engine core stopped"


class Overloaded(Exception):
    """The core's waiting queue is full."""


class EngineGone(Exception):
    """The core is not there (it died or never started)."""


class Receiver(Protocol):
    """Whoever waits for a unit's events (a Job)."""

    def on_token(self, unit: int, token: int) -> None: ...

    def on_result(self, result: Result) -> None: ...


class EngineClient:
    """Submit/abort over one socket. The event loop watches the socket's file descriptor and routes every message
    that has arrived at each wake-up (no future per message, as zmq.asyncio would make); a monitor socket tells
    it when the core's end of the connection closes."""

    def __init__(self, address: str):
        self.address = address
        self.card: ModelCard | None = None
        self.dead: str | None = None
        self.load = (0, 0)  # (waiting, running) as of the core's last Update
        self.messages = 0  # Updates received
        self.receivers: dict[int, Receiver] = {}  # by unit id
        self.acks: dict[int, asyncio.Future[str | None]] = {}  # by job id: None accepted, else why refused
        self.ids = itertools.count(1)
        self.connected = False

    async def start(self) -> None:
        """Connect (the core may still be loading: messages wait in the socket) and say Hello."""
        self.loop = asyncio.get_running_loop()
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        for option in (zmq.SNDHWM, zmq.RCVHWM, zmq.LINGER):
            self.sock.setsockopt(option, 0)  # no high-water mark: never block, never drop
        self.monitor = self.sock.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
        self.loop.add_reader(self.sock.getsockopt(zmq.FD), self._read)
        self.loop.add_reader(self.monitor.getsockopt(zmq.FD), self._watch)
        self.sock.connect(self.address)
        self._send(Hello())
        self._watch()  # a ZeroMQ descriptor signals only changes after the first look at the socket's events

    async def close(self) -> None:
        """Stop watching and close the sockets."""
        self.loop.remove_reader(self.sock.getsockopt(zmq.FD))
        self.loop.remove_reader(self.monitor.getsockopt(zmq.FD))
        self.sock.disable_monitor()
        self.monitor.close(0)
        self.sock.close(0)

    def _send(self, msg) -> None:
        """Send now (never blocks); then look for input: the socket's descriptor may not signal what arrived
        meanwhile (ZeroMQ's descriptor is edge-triggered)."""
        self.sock.send(encode(msg), zmq.NOBLOCK)
        self.loop.call_soon(self._read)

    @property
    def ready(self) -> bool:
        """The core serves."""
        return self.card is not None and self.dead is None

    def new_id(self) -> int:
        """A fresh unit id (unique on this front)."""
        return next(self.ids)

    async def submit(
        self, params: DecodeParams, units: list[WireUnit], stream: bool, arrival: float, receiver: Receiver
    ) -> None:
        """Queue units as one job; returns once the core accepted them. Overloaded when it refused, EngineGone
        when it is not there."""
        if self.dead is not None:
            raise EngineGone(self.dead)
        job = next(self.ids)
        ack = self.acks[job] = asyncio.get_running_loop().create_future()
        self.receivers.update((u.id, receiver) for u in units)
        self._send(Submit.of(job, params, units, stream, arrival))
        refused = await ack
        if refused is not None:
            for u in units:
                self.receivers.pop(u.id, None)
            raise Overloaded(refused)

    def abort(self, ids: list[int]) -> None:
        """Stop these units; nothing more is delivered for them."""
        for i in ids:
            self.receivers.pop(i, None)
        if ids and self.dead is None:
            self._send(Abort(ids))

    def _read(self) -> None:
        """Route every message that has arrived."""
        while not self.sock.closed and self.dead is None and self.sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            msg = to_front.decode(self.sock.recv(zmq.NOBLOCK))
            if isinstance(msg, Ready):
                self.card = pickle.loads(msg.card)  # from our own engine core, over a private socket
            else:
                self._dispatch(msg)

    def _dispatch(self, update: Update) -> None:
        """Acks first, then tokens, then results (a unit's last token comes before its result)."""
        self.messages += 1
        self.load = (update.waiting, update.running)
        for job in update.accepted:
            self._ack(job, None)
        for job, why in update.refused:
            self._ack(job, why)
        for unit, token in zip(update.ids, update.tokens, strict=True):
            if (receiver := self.receivers.get(unit)) is not None:
                receiver.on_token(unit, token)
        for result in update.results:
            if (receiver := self.receivers.pop(result.id, None)) is not None:
                receiver.on_result(result)

    def _ack(self, job: int, refused: str | None) -> None:
        fut = self.acks.pop(job, None)
        if fut is not None and not fut.done():
            fut.set_result(refused)

    def _watch(self) -> None:
        """The first disconnect after a connection means the core is gone: fail everything in flight at once."""
        while not self.monitor.closed and self.dead is None and self.monitor.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            event = recv_monitor_message(self.monitor, zmq.NOBLOCK)["event"]
            if event == zmq.EVENT_CONNECTED:
                self.connected = True
            elif event == zmq.EVENT_DISCONNECTED and self.connected:
                self._read()  # whatever the core said before it went
                self._die(GONE)

    def _die(self, why: str) -> None:
        """Mark the core dead; every waiting job and unit gets an error now."""
        log.error("%s (%s): failing %d units in flight", why, self.address, len(self.receivers))
        self.dead = why
        for fut in self.acks.values():
            if not fut.done():
                fut.set_exception(EngineGone(why))
        self.acks.clear()
        receivers, self.receivers = self.receivers, {}
        for unit, receiver in receivers.items():
            receiver.on_result(Result(unit, [], 0.0, 0.0, why, "not_ready"))
