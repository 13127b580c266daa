#!/usr/bin/env bash
# launch.sh for run 'variant-dapo', rendered by llm-finetuning 0.1.0 from brief sha256 367e6abe42381c09bcde5e4c07f8a237d37f1389b588b2e3f5c495582b8b6101
# Do not edit: `finetune launch` refuses a rendered file whose sha256 differs from manifest.json.
# 1 training process(es) on GPU(s) all, single.
# Usage: bash launch.sh [--resume]   (each process checks manifest.json and the gate before training)
set -euo pipefail
RUN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$RUN_DIR"
export PYTHONSAFEPATH=1  # python -m never puts the run folder (writable) first on sys.path: nothing is imported from it
PYTHON="${PYTHON:-python}"

accelerate launch --config_file accelerate.yaml \
  -m llm_finetuning.launch.worker "$RUN_DIR" "$@"
