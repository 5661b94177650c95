"""The server with the built-in model and small file limits, shared by the document tests."""

from __future__ import annotations

import pytest

from app.settings import BUILTIN
from bench.harness.server import ServerProcess

LIMITS = {
    "--max-file-bytes": "300000",
    "--max-unzipped-bytes": "2000000",
    "--max-zip-entries": "60",
    "--max-segments": "300",
    "--max-file-chars": "20000",
}


@pytest.fixture(scope="session")
def builtin(tmp_path_factory):
    """The built-in en-es model behind a server whose translated files go to a temporary folder."""
    files = tmp_path_factory.mktemp("files")
    args = [a for pair in LIMITS.items() for a in pair]
    proc = ServerProcess("--model", str(BUILTIN), "--warmup-rounds", "0", "--files-dir", str(files), *args).wait()
    yield proc
    proc.stop()
