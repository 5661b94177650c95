#!/usr/bin/env bash
# The CUDA test lanes, one path a line: every tests/model and tests/app file that mentions cuda, the parity tests with
# transformers, the decoding and overlap oracles; the servers on cuda (tests/app/test_cuda.py) left for the caller to
# run last (bench/gpu/check.sh 1; bench/gpu/rehearse.sh runs them all on the CPU).
cd "$(dirname "$0")/../.."
(grep -rlE "cuda" tests/model tests/app --include='test_*.py'; ls tests/model/test_*parity*.py \
  tests/model/runner/test_decoding.py tests/app/test_overlap.py) | sort -u | grep -v test_cuda
