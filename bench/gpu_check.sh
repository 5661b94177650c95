#!/usr/bin/env bash
# Next GPU session (issues 13/14): the overlap scheduler's CUDA lanes, then its numbers. One call, < 600 s.
# device run: command "bash bench/gpu_check.sh", carry [".whl"] (the wheels the GPU machine lacks: ../shared/gpu/README.md)
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
cp docs/benchmarks.md $OUT/benchmarks.md
python3 -m bench.opus_shape /tmp/opus-mt-en-de > /dev/null 2>&1 &
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/model/test_overlap.py tests/model/test_static.py \
  tests/app/test_overlap.py tests/app/test_cuda.py tests/model/test_decoding.py 2>&1 | tee $OUT/tests.log | tail -12
wait
timeout 150 python3 -m bench.gpu_speed --compare-overlap --output $OUT/benchmarks.md 2>&1 | tee $OUT/gpu_speed.log | tail -30
flags="--device cuda --model /tmp/opus-mt-en-de --clients 64,256 --client-procs 8 --workers 4 --threads 4 --requests 2048"
timeout 110 python3 -m bench.serving $flags --out $OUT/benchmarks.md 2>&1 | tee $OUT/serving.log | grep -E "^this tree|^\| this"
timeout 110 python3 -m bench.serving $flags --overlap off --no-write 2>&1 | tee $OUT/serving_seq.log | grep -E "^this tree|^\| this"
