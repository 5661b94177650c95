"""The container tests (marked `container`) build on images that take minutes to make: they run in their own lane,
`make test-deploy`, which prepares podman and the images first; elsewhere they skip, saying so."""

from __future__ import annotations

import os

import pytest

from .podman import LANE


def pytest_collection_modifyitems(config, items):
    if os.environ.get(LANE) == "1":
        return
    skip = pytest.mark.skip(reason="container test: runs in the deployment lane, `make test-deploy`")
    for item in items:
        if item.get_closest_marker("container"):
            item.add_marker(skip)
