#!/usr/bin/env bash
# launch.sh for run 'two-nodes', rendered by llm-finetuning 0.1.0 from brief sha256 ccd4bac64e95d34e873fa1cfa0766ce0b83e9f9e1c358d4dde84cc807a854480
# Do not edit: `finetune launch` refuses a rendered file whose sha256 differs from manifest.json.
# 16 training process(es) on GPU(s) all, zero3.
# Usage: bash launch.sh [--resume]   (each process checks manifest.json and the gate before training)
set -euo pipefail
RUN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$RUN_DIR"
export PYTHONSAFEPATH=1  # python -m never puts the run folder (writable) first on sys.path: nothing is imported from it
PYTHON="${PYTHON:-python}"

accelerate launch --config_file accelerate.yaml \
  -m llm_finetuning.launch.worker "$RUN_DIR" "$@"
