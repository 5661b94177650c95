"""Session-wide tiny artefacts shared by the test tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.harness.fixtures import make_marian, make_native


@pytest.fixture(scope="session")
def native_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random native en-es checkpoint directory."""
    return make_native(tmp_path_factory.mktemp("native") / "tiny-en-es")


@pytest.fixture(scope="session")
def marian_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random Hugging Face Marian checkpoint directory named like OPUS-MT."""
    return make_marian(tmp_path_factory.mktemp("marian") / "opus-mt-en-es")
