#!/usr/bin/env bash
# launch.sh for run 'tracking', rendered by llm-finetuning 0.1.0 from brief sha256 94a4883060cb25e4444465795107fdaae6f9ab8ecfa572ab750cc2ac159cdd7a
# Do not edit: `finetune launch` refuses a rendered file whose sha256 differs from manifest.json.
# 1 training process(es) on CPU, single.
# Usage: bash launch.sh [--resume]   (each process checks manifest.json and the gate before training)
set -euo pipefail
RUN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$RUN_DIR"
export PYTHONSAFEPATH=1  # python -m never puts the run folder (writable) first on sys.path: nothing is imported from it
PYTHON="${PYTHON:-python}"

accelerate launch --config_file accelerate.yaml \
  -m llm_finetuning.launch.worker "$RUN_DIR" "$@"
