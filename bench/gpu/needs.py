"""The distributions the bare GPU machine must be brought (`bench/gpu/wheels.sh`): every runtime dependency of the
project (pyproject's and theirs) and the tests', pinned to this environment's versions, less torch with its own
dependencies, numpy, sentencepiece and safetensors, which the machine has and which must not be shadowed."""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
TESTS = [
    "pytest",
    "pytest-timeout",
    "hypothesis",
    "httpx-sse",
    "uvloop",
    "httptools",
    "websockets",
    "watchfiles",
]  # the tests' (the CUDA lanes import hypothesis) and uvicorn[standard]'s
MACHINE = ["torch", "numpy", "sentencepiece", "safetensors"]  # with torch's own requirements: never shadowed
HAS = [*MACHINE, "transformers", "sacrebleu", "aiohttp"]  # what the machine has that the project uses (a rehearsal's)


def closure(names: Iterable[str]) -> dict[str, str]:
    """{distribution: installed version} of `names` and everything they require (no extras), as installed here."""
    seen, todo = {}, list(names)
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        seen[name] = dist.version
        todo += [
            r.name
            for r in map(Requirement, dist.requires or [])
            if r.marker is None or r.marker.evaluate({"extra": ""})
        ]
    return seen


def needs(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """name==version of each distribution to bring."""
    roots = [Requirement(d).name for d in tomllib.loads(pyproject.read_text())["project"]["dependencies"]]
    have = closure(MACHINE)
    return [f"{n}=={v}" for n, v in sorted(closure(roots + TESTS).items()) if n not in have]


def pins(names: Iterable[str]) -> list[str]:
    """name==version of `names` as installed here."""
    return [f"{n}=={distribution(n).version}" for n in names]


if __name__ == "__main__":  # the pins to bring; with --has, those of what the machine has (bench/gpu/rehearse.sh)
    print(" ".join(pins(HAS) if sys.argv[1:] == ["--has"] else needs()))
