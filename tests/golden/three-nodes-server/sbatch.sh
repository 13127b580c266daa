#!/usr/bin/env bash
# sbatch.sh for run 'three-nodes-server', rendered by llm-finetuning 0.1.0 from brief sha256 320f470add179bafcbf178327f94030955230a767fb90cfa7fab59c0739007c5
# Do not edit: `finetune launch` refuses a rendered file whose sha256 differs from manifest.json.
# Submit from this directory: sbatch sbatch.sh [--resume]
# 3 node(s) x 8 GPU(s): 16 training process(es) on 2 node(s), fsdp2; `trl vllm-serve` on 4 GPU(s) of the first node.
#SBATCH --job-name=three-nodes-server
#SBATCH --nodes=3
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --exclusive
#SBATCH --output=slurm-%j.out
set -euo pipefail
RUN_DIR="$PWD"  # sbatch runs a copy of this script: submit from this directory (or with --chdir)
cd "$RUN_DIR"
export PYTHONSAFEPATH=1  # python -m never puts the run folder (writable) first on sys.path: nothing is imported from it
PYTHON="${PYTHON:-python}"

wait_for_server() {  # URL PID: poll the server's /health endpoint until it answers
  local url="$1" pid="$2" i
  for i in $(seq 1 900); do
    if "$PYTHON" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$url" 2>/dev/null; then
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "launch: the vLLM server exited before answering $url; see $RUN_DIR/vllm-server.log" >&2
      return 1
    fi
    sleep 1
  done
  echo "launch: no answer from $url after 900 s; see $RUN_DIR/vllm-server.log" >&2
  return 1
}
MODEL="$("$PYTHON" -m llm_finetuning.launch.worker --print-model "$RUN_DIR")"
mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
HEAD="${NODES[0]}"

# The first node serves generations; the other 2 train (TRL's multi-node layout).
srun --nodes=1 --ntasks=1 --nodelist="$HEAD" env CUDA_VISIBLE_DEVICES=0,1,2,3 \
  trl vllm-serve --model "$MODEL" --tensor_parallel_size 4 --gpu_memory_utilization 0.9 --dtype bfloat16 --max_model_len 1024 --host 0.0.0.0 --port 8000 \
  >"$RUN_DIR/vllm-server.log" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
wait_for_server "http://$HEAD:8000/health/" "$SERVER_PID"
MAIN="${NODES[1]}"
srun --nodes=2 --ntasks-per-node=1 --exclude="$HEAD" bash -c \
  'accelerate launch --config_file accelerate.yaml --machine_rank "$SLURM_PROCID" --main_process_ip "$1" \
     --main_process_port 29500 -m llm_finetuning.launch.worker "$2" --vllm-server-host "$3" "${@:4}"' \
  _ "$MAIN" "$RUN_DIR" "$HEAD" "$@"
