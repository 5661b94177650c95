#!/usr/bin/env bash
# Build the offline en->es training corpus and teacher scores (stages 0-10 of training/README.md).
# Run from the repository root: training/pipeline.sh  (PYTHON defaults to .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
INIT=training/work/init  # the model this build continues from: the built-in model of commit 48cd4ae
mkdir -p "$INIT" && git archive 48cd4ae model/builtin/en-es | tar -x -C "$INIT" --strip-components=3
time training/fetch_catalogs.sh
for stage in english distill bible handbook catalogs helpdocs docs dictionary phrasebook "corpus --spm $INIT/spm.model" "vocab spm" teacher; do
    echo "== training.$stage"
    start=$SECONDS
    # shellcheck disable=SC2086
    "$PYTHON" -m training.$stage
    echo "   (${stage%% *} took $((SECONDS - start)) s)"
done
