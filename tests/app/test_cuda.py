"""On a GPU: the server on CUDA (its decode step replayed as CUDA graphs, or run eagerly at the same static shapes)
answers what offline generation gives on the same device and dtype."""

from __future__ import annotations

import pytest
import torch

from bench.harness.client import HTTP
from bench.harness.server import ServerProcess
from model.loading.checkpoint import load
from tests.app.helpers import offline, ok

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
TEXTS = ["the cat sleeps", "a big red dog runs in the city", "hello world", "the small green tree eats", "good night"]


@pytest.fixture(scope="module", params=["--cuda-graphs", "--no-cuda-graphs", "--no-overlap"])
def gpu_server(native_dir, request):
    """The server on cuda in float32 (exact comparisons), graphs on or off, overlap on (default) or off."""
    args = ("--model", str(native_dir), "--device", "cuda", "--dtype", "float32", "--max-batch-size", "8")
    proc = ServerProcess(*args, request.param).wait()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def gpu_checkpoint(native_dir):
    """The same checkpoint on cuda in float32, in this process: the offline oracle."""
    return load(native_dir, device="cuda")


def test_server_on_the_gpu_equals_offline_generation_there(gpu_server, gpu_checkpoint):
    """Greedy and beam 4, texts of several lengths decoded together: the translations offline generation gives."""
    for beam in (1, 4):
        answer = ok(gpu_server.url, TEXTS, parameters={"beam_size": beam, "max_new_tokens": 40})
        expected = [offline(gpu_checkpoint, t, beam_size=beam, max_new_tokens=40)[0] for t in TEXTS]
        assert answer["translatedText"] == expected, beam
    (m,) = HTTP.get(gpu_server.url + "/info").json()["models"]
    assert m["dtype"] == "float32" and m["device"].startswith("cuda")
