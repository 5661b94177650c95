#!/usr/bin/env bash
# Build the offline en->es training corpus, SentencePiece model and teacher scores (stages 1-6).
# Run from the repository root: training/pipeline.sh  (PYTHON defaults to .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
for stage in english distill bible handbook corpus teacher; do
    echo "== training.$stage"
    start=$SECONDS
    "$PYTHON" -m "training.$stage"
    echo "   ($stage took $((SECONDS - start)) s)"
done
