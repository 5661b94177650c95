"""Real servers shared by the HTTP tests (besides those of tests/conftest.py), and the tiny checkpoint in-process."""

from __future__ import annotations

import shutil

import pytest
import torch

from app.settings import BUILTIN
from bench.harness.server import RedisServer, ServerProcess, add_keys
from model.loading.checkpoint import Checkpoint, load
from tests.app.inprocess import POISON, CoreThread, Faulty, make_core

torch.set_num_threads(1)  # like the server (OMP_NUM_THREADS=1): same kernels, same floating-point results


@pytest.fixture(scope="session")
def small(native_dir, session_servers):
    """One row at a time, at most 2 waiting requests, keep-alive comments after 0.1 s of silence."""
    args = ("--model", str(native_dir), "--max-queue", "2", "--max-batch-size", "1", "--warmup-rounds", "0")
    session_servers.append(ServerProcess(*args, "--keepalive-seconds", "0.1"))
    return session_servers[-1].wait()


@pytest.fixture(scope="session")
def deepl_keyed(tmp_path_factory, session_servers):
    """The built-in en-es model behind API keys, translated files in a temporary folder, a 20000-byte body limit:
    (server, keys file). The key file starts empty; each test file adds keys of its own (as `python -m app keys add`
    does beside a running server)."""
    db = add_keys(tmp_path_factory.mktemp("keys") / "keys.sqlite", {})
    files = tmp_path_factory.mktemp("files")
    args = ("--model", str(BUILTIN), "--warmup-rounds", "0", "--api-keys", "--keys-db", str(db))
    session_servers.append(ServerProcess(*args, "--files-dir", str(files), "--max-body-bytes", "20000"))
    return session_servers[-1].wait(), db


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
