#!/usr/bin/env bash
# sbatch.sh for run 'two-nodes', rendered by llm-finetuning 0.1.0 from brief sha256 ccd4bac64e95d34e873fa1cfa0766ce0b83e9f9e1c358d4dde84cc807a854480
# Do not edit: `finetune launch` refuses a rendered file whose sha256 differs from manifest.json.
# Submit from this directory: sbatch sbatch.sh [--resume]
# 2 node(s) x 8 GPU(s): 16 training process(es) on 2 node(s), zero3.
#SBATCH --job-name=two-nodes
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --exclusive
#SBATCH --output=slurm-%j.out
set -euo pipefail
RUN_DIR="$PWD"  # sbatch runs a copy of this script: submit from this directory (or with --chdir)
cd "$RUN_DIR"
export PYTHONSAFEPATH=1  # python -m never puts the run folder (writable) first on sys.path: nothing is imported from it
PYTHON="${PYTHON:-python}"
mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
HEAD="${NODES[0]}"

srun --nodes=2 --ntasks-per-node=1 bash -c \
  'accelerate launch --config_file accelerate.yaml --machine_rank "$SLURM_PROCID" --main_process_ip "$1" \
     --main_process_port 29500 -m llm_finetuning.launch.worker "$2" "${@:3}"' \
  _ "$HEAD" "$RUN_DIR" "$@"
