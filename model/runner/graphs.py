"""Device work captured as CUDA graphs, a cache keyed on the work's inputs, and replayed.

A piece of work is a function of a plan (host values) and of tensors, among them dataclasses of tensors: its key
is the plan, every host value inside its arguments and every tensor's shape and dtype, so that a replay does what
a run with these arguments would. Tensors given by reference (buffers the work changes in place, such as the K/V
pool) are read and written where they are, their addresses part of the key; every other input is copied into the
graph's own buffers before every replay. Fields marked `host` in a dataclass never
reach the work (they come back as None): the work must not read them.

A key seen for the first time runs eagerly (the graph's warm-up), the second time it is captured and replayed. The
graphs share one memory pool: the outputs of a replay are valid until the next replay of any of them, and the
next step's inputs are copied from them before it. As in vLLM and SGLang, only a bounded set of graphs is kept."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

HOST = {"host": True}  # metadata of a dataclass field that the device work does not read


def host_field(**kwargs) -> Any:
    """A dataclass field the device work never reads (it is not part of a graph's key)."""
    return field(metadata=HOST, **kwargs)


def flatten(x: Any, tensors: list[Tensor], strict: bool = True) -> Hashable:
    """`x`'s structure and host values (tensors as their shape and dtype, appended to `tensors` in order); an object
    a graph cannot hold (a generator) raises TypeError, or with `strict` off stands for itself."""
    if isinstance(x, Tensor):
        tensors.append(x)
        return "T", tuple(x.shape), x.dtype
    if x is None or isinstance(x, (bool, int, float, str, torch.dtype, torch.device)):
        return x
    if isinstance(x, (list, tuple)):
        return type(x).__name__, tuple(flatten(v, tensors, strict) for v in x)
    if dataclasses.is_dataclass(x):
        host = (None if f.metadata.get("host") else flatten(getattr(x, f.name), tensors, strict) for f in _fields(x))
        return type(x).__name__, tuple(host)
    if not strict:
        return id(x)
    raise TypeError(f"no graph for work reading a {type(x).__name__}")


def rebuild(x: Any, tensors: Iterator[Tensor]) -> Any:
    """`x` with its tensors taken in order from `tensors`, and its host-only fields None."""
    if isinstance(x, Tensor):
        return next(tensors)
    if isinstance(x, (list, tuple)):
        return type(x)(rebuild(v, tensors) for v in x)
    if dataclasses.is_dataclass(x):
        values = {f.name: None if f.metadata.get("host") else rebuild(getattr(x, f.name), tensors) for f in _fields(x)}
        return type(x)(**values)
    return x


def _fields(x: Any) -> tuple[dataclasses.Field, ...]:
    """A dataclass's init fields."""
    return tuple(f for f in dataclasses.fields(x) if f.init)


@dataclass
class Captured:
    """One key's graph, its outputs (as the work returns them, over the graph's tensors) and its input buffers."""

    graph: Any
    outputs: Any
    inputs: list[Tensor]


class Graphs:
    """Work run as CUDA graphs (with `enabled`, on CUDA; else eagerly), at most `most` kept, least recently used
    dropped first. With `check` (the tests) eager work reads its arguments as a graph would: host-only fields None."""

    check = False

    def __init__(self, enabled: bool = False, most: int = 64):
        self.enabled, self.most = enabled, most
        self.seen: set[Hashable] = set()
        self.replays = 0
        self.cache: OrderedDict[Hashable, Captured] = OrderedDict()
        self.pool = torch.cuda.graph_pool_handle() if enabled and torch.cuda.is_available() else None

    def __len__(self) -> int:
        return len(self.cache)

    def span(self, used: int, limit: int) -> int:
        """Positions to cover of `used`, of `limit`: rounded up to a power of two (from 32) when graphed, so that
        keys repeat."""
        return min(max(32, 1 << (used - 1).bit_length()), limit) if self.enabled else used

    def eager(self, work: Callable, plan: Hashable, refs: tuple[Tensor, ...], args: tuple) -> Any:
        """work(plan, refs, args), run now (with `check`, host-only fields None, as a graph reads them)."""
        if self.check:
            tensors: list[Tensor] = []
            flatten(args, tensors, strict=False)
            args = rebuild(args, iter(tensors))
        return work(plan, refs, args)

    def run(self, work: Callable, plan: Hashable, refs: tuple[Tensor, ...], args: tuple) -> Any:
        """work(plan, refs, args): replayed when this key was captured, captured the second time it is met."""
        if not self.enabled:
            return self.eager(work, plan, refs, args)
        tensors = []
        try:
            shape = flatten(args, tensors)
        except TypeError:  # something the work reads that a graph cannot hold (a seeded generator): eager
            return work(plan, refs, args)
        key = (plan, shape, tuple((r.data_ptr(), tuple(r.shape), r.dtype) for r in refs))
        got = self.cache.get(key)
        if got is None:
            if key not in self.seen:
                if len(self.seen) > 64 * self.most:  # keys of pools long gone
                    self.seen.clear()
                self.seen.add(key)
                return work(plan, refs, args)
            got = self._capture(work, plan, refs, args, tensors, key)
        self.cache.move_to_end(key)
        for buf, x in zip(got.inputs, tensors, strict=True):
            buf.copy_(x)
        got.graph.replay()
        self.replays += 1
        return got.outputs

    def _capture(self, work: Callable, plan: Hashable, refs: tuple[Tensor, ...], args: tuple, tensors: list[Tensor],
                 key: Hashable) -> Captured:  # fmt: skip
        """Capture work on buffers of its own (inputs are copied in before each replay, this first one included)."""
        inputs = [x.clone() for x in tensors]
        self.cache[key] = got = Captured(*self.record(work, plan, refs, rebuild(args, iter(inputs))), inputs)
        if len(self.cache) > self.most:
            self.cache.popitem(last=False)
        return got

    def record(self, work: Callable, plan: Hashable, refs: tuple[Tensor, ...], args: tuple) -> tuple[Any, Any]:
        """The CUDA graph of work(plan, refs, args) (captured on a side stream, not run) and its outputs; without
        `torch.cuda.graph`'s synchronize, garbage collection and cache release, which would stall the serving loop."""
        graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            graph.capture_begin(pool=self.pool, capture_error_mode="thread_local")
            try:
                outputs = work(plan, refs, args)
            finally:
                graph.capture_end()
        torch.cuda.current_stream().wait_stream(stream)
        return graph, outputs
