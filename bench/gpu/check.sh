#!/usr/bin/env bash
# A GPU session in three device calls of < 600 s each; bench/gpu/README.md says why and how.
# Before: `bash bench/gpu/wheels.sh` here. Then run command "bash bench/gpu/check.sh N", carry [".whl"], N = 1, 2, 3:
#   1  the server's start on the GPU, the CUDA test lanes, then the serving loads (default OPUS-MT beam 4, and mixed) at 64 and 256 clients
#   2  bench.gpu_speed --shape opus: greedy and beam 4 at 1/32/64/256 against transformers fp16/fp32, the roofline
#   3  bench.gpu_speed --shape nllb600m: the same at batch 64
# "bash bench/gpu/check.sh 2 before" (carry [".whl", ".before"]): stage 2 or 3 with the model package in .before/
# (another tree's model/, e.g. main's) under this tree's benchmarks, into $OUT/before/.
# After: python -m bench.report docs/benchmarks.md FILES_AT/*.md   (the sections it wrote under $OUT)
set -x
stage=${1:?usage: bash bench/gpu/check.sh 1|2|3 [before]}
out=${OUT:-/tmp/gpu_check_out}
repo=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$repo PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
if [ "${2:-}" = before ]; then  # `model` from .before/, `bench` and `tests` from this tree (run outside the tree)
  [ -d .before/model ] && [ "$stage" != 1 ] || { echo "before: needs .before/model and stage 2 or 3" >&2; exit 2; }
  export PYTHONPATH=/tmp/site:$repo/.before:$repo
  out=$out/before
  cd /tmp
fi
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv > "$out/gpu.txt" 2>&1
case $stage in
1)
  export MT_SERVER_LOG_DIR=$out/server-logs && mkdir -p "$MT_SERVER_LOG_DIR"  # every server's log comes back
  python3 -m bench.marian /tmp/opus-mt-en-de --beam-default > /dev/null 2>&1
  # the server on the GPU first: time to ready, one translation (2026-11-27: none got ready, a wheel was missing)
  timeout 160 python3 -m bench.gpu.start /tmp/opus-mt-en-de > "$out/start.log" 2>&1 \
    || timeout 60 python3 -m bench.gpu.start /tmp/opus-mt-en-de --device cpu > "$out/start-cpu.log" 2>&1  # a control
  tail -12 "$out"/start*.log
  lanes=$(bash bench/gpu/lanes.sh)
  # the in-process lanes first, then the servers on cuda (each waits up to 120 s, then fails with its log's end)
  timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE $lanes tests/app/test_cuda.py 2>&1 | tee "$out/tests.log" | tail -15
  flags="--device cuda --model /tmp/opus-mt-en-de --clients 64,256 --client-procs 8 --workers 4 --threads 4"
  for load in ${LOADS:-default}; do  # LOADS="default mixed" where the call has 10 minutes to itself
    timeout 170 python3 -m bench.serving $flags --requests 1024 --repeats 3 --load $load --single-requests 0 --no-sweep \
      --out "$out/serving-$load.md" 2>&1 | tee "$out/serving-$load.log" | grep -E "^this tree|^\| this"
  done
  ;;
2) timeout 560 python3 -m bench.gpu_speed --shape opus --budget 380 --out "$out" --no-write 2>&1 \
     | tee "$out/gpu_speed-opus.log" | tail -60 ;;
3) timeout 560 python3 -m bench.gpu_speed --shape nllb600m --budget 380 --out "$out" --no-write 2>&1 \
     | tee "$out/gpu_speed-nllb600m.log" | tail -40 ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
