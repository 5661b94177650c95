"""Session-wide tiny artefacts shared by the test tree, and the real servers that test files of several folders share
(each starts once per session; tests that use one leave no state that another depends on)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import BUILTIN
from bench.harness.fixtures import make_marian, make_native
from bench.harness.server import ServerProcess, stop_all

FILE_LIMITS = {
    "--max-file-bytes": "300000",
    "--max-unzipped-bytes": "2000000",
    "--max-zip-entries": "60",
    "--max-segments": "300",
    "--max-file-chars": "20000",
}
OPUS = {"num_beams": 4, "max_length": 40, "bad_words_ids": "pad"}  # OPUS-MT's shape of defaults, longer outputs


@pytest.fixture(scope="session")
def native_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random native en-es checkpoint directory."""
    return make_native(tmp_path_factory.mktemp("native") / "tiny-en-es")


@pytest.fixture(scope="session")
def marian_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random Hugging Face Marian checkpoint directory named like OPUS-MT."""
    return make_marian(tmp_path_factory.mktemp("marian") / "opus-mt-en-es")


@pytest.fixture(scope="session")
def session_servers():
    """The servers started for the whole session (each fixture adds its own), stopped together at its end."""
    servers: list[ServerProcess] = []
    yield servers
    stop_all(servers)


@pytest.fixture(scope="session")
def server(native_dir, session_servers):
    """The tiny native model with default settings except a batch of 8 requests and 8 rows (long jobs take several
    seconds)."""
    args = ("--model", str(native_dir), "--max-wait-ms", "5", "--warmup-rounds", "1")
    session_servers.append(ServerProcess(*args, "--max-batch-size", "8", "--max-batch-rows", "8"))
    return session_servers[-1].wait()


@pytest.fixture(scope="session")
def builtin(tmp_path_factory, session_servers):
    """The built-in en-es model with default settings (greedy, translation cache off), small file limits
    (FILE_LIMITS), translated files in a temporary folder."""
    files = tmp_path_factory.mktemp("files")
    limits = [a for pair in FILE_LIMITS.items() for a in pair]
    args = ("--model", str(BUILTIN), "--warmup-rounds", "0", "--files-dir", str(files), *limits)
    session_servers.append(ServerProcess(*args))
    return session_servers[-1].wait()


@pytest.fixture(scope="session")
def families(tmp_path_factory, session_servers):
    """One server of three model families: the built-in en-es, a tiny multi-target OPUS-MT (en-fr, en-it; its
    checkpoint asks for beam 4; flat distributions, so beams overtake each other; no byte-fallback pieces, as real
    OPUS-MT vocabularies) and a tiny NLLB (en-de; no byte-fallback pieces either)."""
    pytest.importorskip("transformers")
    from bench.harness.fixtures import make_m2m100

    root = tmp_path_factory.mktemp("families")
    opus = make_marian(
        root / "opus-mt-en-ROMANCE", targets=("fr", "it"), embed_std=0.3, generation=OPUS, byte_fallback=False
    )
    nllb = make_m2m100(root / "nllb-200-tiny", seed=3)
    args = ("--model", str(BUILTIN), "--model", str(opus), "--model", str(nllb), "--warmup-rounds", "0")
    session_servers.append(ServerProcess(*args, "--device", "cpu", "--dtype", "float32"))
    return session_servers[-1].wait()
