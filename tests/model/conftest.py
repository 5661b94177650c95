"""A tiny random model shared by the decoding tests."""

import pytest
import torch

from bench.harness.fixtures import tiny_config
from model.network.transformer import Seq2SeqTransformer
from model.runner.graphs import Graphs


@pytest.fixture(autouse=True)
def _as_graphs_read() -> None:
    """The step's work reads its arguments as a CUDA graph would (host-only fields None): reading one fails."""
    Graphs.check = True
    yield
    Graphs.check = False


@pytest.fixture(scope="module")
def model() -> Seq2SeqTransformer:
    """A 60-token tiny Transformer (CPU, float32) whose scaled embeddings make its outputs depend on the input."""
    torch.manual_seed(1)
    m = Seq2SeqTransformer(tiny_config(60)).eval()
    with torch.no_grad():
        m.tgt_embed.weight.mul_(4.0)
    return m
