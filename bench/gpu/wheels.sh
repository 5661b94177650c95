#!/usr/bin/env bash
# Wheels the GPU machine lacks (../shared/gpu/README.md: it has torch, transformers, httpx, aiohttp, sentencepiece,
# safetensors, numpy, ...; not the server's web stack nor pytest), pinned to this checkout's .venv, into the
# git-ignored .whl/ that the device `run` carries along. Run it here (the registry is in reach; the GPU machine is not):
#     bash bench/gpu/wheels.sh        # then: run command "bash bench/gpu/check.sh 1", carry [".whl"]
set -euo pipefail
cd "$(dirname "$0")/../.."
binary="pydantic-core httptools websockets watchfiles pyzmq msgspec lxml pillow sentencex"  # compiled: CPython 3.12 wheels
pure="fastapi starlette pydantic pydantic-settings python-dotenv typing-inspection annotated-types annotated-doc
  typing-extensions uvicorn python-multipart opentelemetry-api py3langid iso639-lang fastapi-offline redis cachetools
  python-docx python-pptx odfdo srt polib xlsxwriter pytest pytest-timeout pluggy iniconfig pygments httpx-sse"
pins() { .venv/bin/python -c 'import sys; from importlib.metadata import version
print(" ".join(f"{n}=={version(n)}" for n in sys.argv[1:]))' "$@"; }
platforms="--platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64"
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  $platforms --platform manylinux1_x86_64 -d .whl $(pins $binary)
.venv/bin/python -m pip wheel -q --no-deps -w .whl $(pins $pure)  # py3-none-any (built here where only an sdist)
du -sh .whl && ls .whl | wc -l
