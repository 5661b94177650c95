#!/usr/bin/env bash
# The two-way run on a lent GPU, in one device call (training/README.md, "On a GPU").
#   here, once: bash training/gpu.sh pack      -> training/work/gpu/: stages.tar.xz (stages 2-8b's outputs, 13.5 MB)
#               and twoway/ (the committed run, 23 MB, out of the history: RUN below)
#   there:      bash training/gpu.sh MINUTES   (carry ["training/work/gpu"]; the GPU machine has torch, sentencepiece
#               and sacrebleu, which is all training needs)
# It rebuilds stage 9 from the stage outputs, goes on from the committed run (else the built-in model), trains MINUTES
# on the GPU and exports the run with its state into $OUT/twoway, the weights split in parts under the 16 MiB a
# returned file may have: `cat $FILES_AT/twoway/model.safetensors.* > model.safetensors`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
stages="phrasebook docs helpdocs catalogs bible dictionary distilled dev test"
if [ "${1:?usage: bash training/gpu.sh pack|MINUTES}" = pack ]; then
  # the commit that added the run as training/checkpoints/twoway (kept in the history, out of the tree that travels);
  # asked here only: the copy on the GPU machine has no history
  RUN=${RUN:-$(git log --diff-filter=A --format=%h -1 -- training/checkpoints/twoway/training.json)}
  mkdir -p training/work/gpu
  tar -C training/work -cf - $(for s in $stages; do echo "$s.en $s.es"; done) | xz -T2 -6 > training/work/gpu/stages.tar.xz
  git archive "$RUN" training/checkpoints/twoway | tar -x -C training/work/gpu --strip-components=2
  ls -la training/work/gpu training/work/gpu/twoway
  exit 0
fi
out=${OUT:-/tmp/gpu_train_out}/twoway
init=training/work/gpu/twoway
[ -f "$init/model.safetensors" ] || init=model/builtin/en-es
mkdir -p "$out" && rm -f training/work/train2.pt
tar -C training/work -xJf training/work/gpu/stages.tar.xz
"$PYTHON" -m training.corpus --spm model/builtin/en-es/spm.model | tail -3
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
"$PYTHON" -m training.train --run training/work/runG --init "$init" --languages en,es --d-model 192 \
  --encoder-layers 6 --decoder-layers 6 --ffn 1536 --dropout 0.1 --bf16 --lr 7e-4 --warmup 200 \
  --max-tokens 16384 --minutes "$1" --save-every 1.5 --dev-sentences 100 --threads 4 ${COOLDOWN:+--cooldown $COOLDOWN} \
  | tee "$out/train.log" | { grep -E "^(started|resumed|checkpoint)|00 epoch" || true; }
"$PYTHON" -m training.export --checkpoint training/work/runG/last.pt --out "$out" --spm model/builtin/en-es/spm.model \
  --state
rm -f "$out/spm.model"  # the built-in model's, unchanged
split -b 15M -d "$out/model.safetensors" "$out/model.safetensors." && rm "$out/model.safetensors"
ls -la "$out"
