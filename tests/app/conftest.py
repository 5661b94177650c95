"""A real server on the tiny native model, shared by the HTTP tests, and the same checkpoint in-process."""

from __future__ import annotations

import shutil

import pytest
import torch

from bench.harness.server import RedisServer, ServerProcess
from model.loading.checkpoint import Checkpoint, load
from tests.app.inprocess import POISON, CoreThread, Faulty, make_core

torch.set_num_threads(1)  # like the server (OMP_NUM_THREADS=1): same kernels, same floating-point results


@pytest.fixture(scope="session")
def server(native_dir):
    """The server with default settings except a batch of 8 requests and 8 rows (long jobs take several seconds)."""
    args = ("--model", str(native_dir), "--max-wait-ms", "5", "--warmup-rounds", "1")
    proc = ServerProcess(*args, "--max-batch-size", "8", "--max-batch-rows", "8").wait()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def small(native_dir):
    """One row at a time, at most 2 waiting requests, keep-alive comments after 0.1 s of silence."""
    args = ("--model", str(native_dir), "--max-queue", "2", "--max-batch-size", "1", "--warmup-rounds", "0")
    proc = ServerProcess(*args, "--keepalive-seconds", "0.1").wait()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def checkpoint(native_dir) -> Checkpoint:
    """The server's checkpoint, loaded in the test process (the offline oracle and the engine tests)."""
    return load(native_dir)


@pytest.fixture
def faulty(checkpoint) -> Faulty:
    """The checkpoint's model wrapped to fail on demand."""
    return Faulty(checkpoint.model, checkpoint.tokenizer.encode(POISON)[:-1])


@pytest.fixture
def served(faulty, checkpoint):
    """An engine core over the faulty model (8 rows, a 20 ms gathering window), served from a thread."""
    core_thread = CoreThread(make_core(faulty, max_wait_ms=20), checkpoint)
    yield core_thread
    core_thread.stop()


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A fresh redis-server for the module (skips when Debian's redis-server is not installed)."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed (Debian package redis-server; .ci/system-deps installs it)")
    redis = RedisServer(tmp_path_factory.mktemp("redis"))
    yield redis.url
    redis.stop()
