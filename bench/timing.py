"""Timing engines side by side: each in this process or in its own (spawned) process, taking turns batch by batch
with the start rotating, so that load on a shared machine hits all of them alike."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import torch

from bench.engines import Engine


def sync() -> None:
    """Wait for the GPU (when there is one), so that wall times cover the work."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


class Local:
    """An engine in this process."""

    def __init__(self, name: str, engine: Engine):
        self.name, self.run = name, engine

    def timed(self, batch: list[list[int]], beam: int, new: int) -> tuple[list[list[int]], float]:
        """The engine's outputs on one batch and its wall seconds."""
        return self.measured(batch, beam, new)[:2]

    def measured(self, batch: list[list[int]], beam: int, new: int) -> tuple[list[list[int]], float, float]:
        """The engine's outputs on one batch, its wall seconds and this process's CPU seconds (all its threads: at
        one thread, the time it ran, whatever else the machine ran meanwhile)."""
        sync()
        start, cpu = time.perf_counter(), time.process_time()
        out = self.run(batch, beam, new)
        sync()
        return out, time.perf_counter() - start, time.process_time() - cpu

    def close(self) -> None:
        """Nothing to release."""


_WORKER: Local | None = None  # the engine of a worker process


def _start_worker(name: str, build: Callable[..., Engine], args: tuple, threads: int) -> None:
    """Worker initializer: set the thread count and build this process's one engine."""
    global _WORKER
    torch.set_num_threads(threads)
    _WORKER = Local(name, build(*args))


def _measured_in_worker(batch: list[list[int]], beam: int, new: int) -> tuple[list[list[int]], float, float]:
    """Local.measured in the worker."""
    return _WORKER.measured(batch, beam, new)


class Isolated:
    """An engine in its own spawned process (its own OpenMP runtime and thread pool: CTranslate2's runtime slows
    torch down when they share a process), built there by `build(*args)`, a module-level function."""

    def __init__(self, name: str, build: Callable[..., Engine], args: tuple, threads: int):
        self.name = name
        ctx = multiprocessing.get_context("spawn")
        init = (name, build, args, threads)
        self.pool = ProcessPoolExecutor(1, mp_context=ctx, initializer=_start_worker, initargs=init)

    def timed(self, batch: list[list[int]], beam: int, new: int) -> tuple[list[list[int]], float]:
        """The engine's outputs on one batch and its wall seconds, timed in the worker."""
        return self.measured(batch, beam, new)[:2]

    def measured(self, batch: list[list[int]], beam: int, new: int) -> tuple[list[list[int]], float, float]:
        """The engine's outputs on one batch, its wall seconds and the worker's CPU seconds, timed in the worker."""
        return self.pool.submit(_measured_in_worker, batch, beam, new).result()

    def run(self, batch: list[list[int]], beam: int, new: int) -> list[list[int]]:
        """The engine's outputs on one batch."""
        return self.timed(batch, beam, new)[0]

    def close(self) -> None:
        """Stop the worker."""
        self.pool.shutdown()


@dataclass
class Cell:
    """One engine at one (mode, batch size): generated tokens, wall seconds, its process's CPU seconds, sentences, rows
    of the wrong length."""

    tokens: int = 0
    seconds: float = 0.0
    cpu: float = 0.0
    sentences: int = 0
    wrong_length: int = 0

    @property
    def tps(self) -> float:
        """Generated tokens per second."""
        return self.tokens / self.seconds if self.seconds else 0.0


def time_cell(runners: list[Local | Isolated], sources: list[list[int]], batch: int, beam: int, new: int):
    """Warm every engine on this shape, then run them interleaved batch by batch, rotating who goes first:
    {name: Cell}."""
    parts = [sources[i : i + batch] for i in range(0, len(sources), batch)]
    for r in runners:
        r.run(parts[0], beam, min(new, 8))
    cells = {r.name: Cell() for r in runners}
    for k, part in enumerate(parts):
        for j in range(len(runners)):
            r = runners[(k + j) % len(runners)]
            out, seconds, cpu = r.measured(part, beam, new)
            c = cells[r.name]
            c.tokens += sum(map(len, out))
            c.seconds, c.cpu = c.seconds + seconds, c.cpu + cpu
            c.sentences += len(part)
            c.wrong_length += sum(len(o) != new for o in out)
    return cells
