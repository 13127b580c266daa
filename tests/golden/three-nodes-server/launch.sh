#!/usr/bin/env bash
# launch.sh for run 'three-nodes-server', rendered by llm-finetuning 0.1.0 from brief sha256 320f470add179bafcbf178327f94030955230a767fb90cfa7fab59c0739007c5
# Do not edit: `finetune launch` refuses a rendered file whose sha256 differs from manifest.json.
# 16 training process(es) on GPU(s) all, fsdp2; `trl vllm-serve` on GPU(s) 0,1,2,3.
# Usage: bash launch.sh [--resume]   (each process checks manifest.json and the gate before training)
set -euo pipefail
RUN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
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

# The vLLM server generates on its own GPU(s); it is stopped whenever this script exits.
CUDA_VISIBLE_DEVICES=0,1,2,3 trl vllm-serve --model "$MODEL" --tensor_parallel_size 4 --gpu_memory_utilization 0.9 --dtype bfloat16 --max_model_len 1024 \
  --host 127.0.0.1 --port 8000 >"$RUN_DIR/vllm-server.log" 2>&1 &
SERVER_PID=$!
stop_server() { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
wait_for_server "http://127.0.0.1:8000/health/" "$SERVER_PID"

accelerate launch --config_file accelerate.yaml \
  -m llm_finetuning.launch.worker "$RUN_DIR" "$@"
