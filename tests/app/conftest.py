"""A real server on the tiny native model, shared by the HTTP tests, and the same checkpoint in-process."""

from __future__ import annotations

import pytest
import torch

from model.checkpoint import Checkpoint, load
from tests.server import ServerProcess

torch.set_num_threads(1)  # like the server (OMP_NUM_THREADS=1): same kernels, same floating-point results


@pytest.fixture(scope="session")
def server(native_dir):
    """The server with default settings except a batch of 8 rows (long jobs take several seconds)."""
    proc = ServerProcess(
        "--model", str(native_dir), "--max-wait-ms", "5", "--warmup-rounds", "1", "--max-batch-size", "8"
    ).wait()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def checkpoint(native_dir) -> Checkpoint:
    """The server's checkpoint, loaded in the test process (the offline oracle and the engine tests)."""
    return load(native_dir)
