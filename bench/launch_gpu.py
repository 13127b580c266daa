"""GPU benchmark of the render/launch path: `finetune launch` against TRL's own `trl grpo --config`.

Builds a model of SmolLM2-135M's published shape (LlamaForCausalLM: 30 layers, hidden 576, 9 heads,
3 KV heads, vocab 49152, tied embeddings) with RANDOM weights and a small locally trained tokenizer, on
the machine it runs on (the real 98 MB GGUF does not fit one device call; the learning run with real
weights belongs to the demo benchmark). Random weights never stop early, so every completion runs to
max_completion_length: this measures throughput, not learning.

The gate needs a sealed inspection and a nonzero baseline. A random model has no honest nonzero
baseline, so this script writes SYNTHETIC records through the records API (reviewer named as this
script) only so that the real `finetune render` and `finetune launch` run end to end; the results file
says so. Never use records made this way for a real run.

Baseline (same run, same rendered file): `trl grpo --config grpo_config.yaml` (TRL 1.16's own CLI).
Reported as ratios against it, plus absolute steps/s, completion tokens/s and peak memory.

    python bench/launch_gpu.py --gpus 1 --steps 12 --out bench/results/launch-h200.json
    python bench/launch_gpu.py --gpus 2 --steps 12 --out bench/results/launch-h200x2.json --no-baseline
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _synthetic import build_random_model, synthetic_records

REPO = Path(__file__).resolve().parents[1]
BRIEF = """\
brief: 1
name: launch-bench
method: grpo
task:
  summary: Return a JSON object with keys name and age (throughput benchmark, random weights)
model:
  id: ./model
  dtype: {dtype}
data:
  train: data/train.jsonl
rewards:
  - fn: json_schema
    args: {{schema_field: schema}}
grpo:
  num_generations: 8
  per_device_train_batch_size: 8
  gradient_accumulation_steps: 4
  max_completion_length: {max_len}
  max_steps: {steps}
  save_steps: {steps}
  logging_steps: 1
  gradient_checkpointing: false
hardware:
  gpus: {gpus}
  gpu_memory_gib: 139
  generation: transformers
"""


class GpuMemoryPoller:
    """Peak memory used per GPU as nvidia-smi reports it (CUDA context and every process included)."""

    def __init__(self) -> None:
        self.peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=10).stdout
                for line in out.strip().splitlines():
                    i, used = (int(x) for x in line.split(","))
                    self.peak[i] = max(self.peak.get(i, 0), used)
            except (OSError, ValueError, subprocess.SubprocessError):
                pass
            self._stop.wait(0.5)

    def __enter__(self) -> GpuMemoryPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def gib(self) -> dict[str, float]:
        return {str(i): round(mib / 1024, 2) for i, mib in sorted(self.peak.items())}


def summarise(log_history: list[dict[str, Any]], completions_per_step: int, warmup: int) -> dict[str, Any]:
    """Throughput from the log events: TRL's end-of-training `train_runtime` (every step, generation
    included), and, where `elapsed_s` exists (finetune launch's metrics.jsonl), the steps after warmup."""
    steps = [r for r in log_history if "loss" in r and "completions/mean_length" in r]
    summary = next((r for r in log_history if "train_runtime" in r), {})
    runtime = float(summary.get("train_runtime") or 0)
    tokens = sum(r["completions/mean_length"] * completions_per_step for r in steps)
    out: dict[str, Any] = {
        "steps": len(steps),
        "train_runtime_s": round(runtime, 2) if runtime else None,
        "steps_per_s": round(len(steps) / runtime, 4) if runtime else None,
        "completion_tokens_per_s": round(tokens / runtime, 1) if runtime else None,
        "mean_completion_length": round(tokens / completions_per_step / len(steps), 1) if steps else None,
    }
    timed = [r for r in steps if "elapsed_s" in r]
    if len(timed) > warmup + 1:
        first, last = timed[warmup], timed[-1]
        span = last["elapsed_s"] - first["elapsed_s"]
        n = last["step"] - first["step"]
        later = sum(r["completions/mean_length"] * completions_per_step for r in timed[warmup + 1:])
        out["after_warmup"] = {"steps_excluded": warmup + 1, "steps_per_s": round(n / span, 4) if span else None,
                               "completion_tokens_per_s": round(later / span, 1) if span else None}
    alloc = [r["memory/max_allocated_gib"] for r in steps if "memory/max_allocated_gib" in r]
    if alloc:
        out["peak_allocated_gib_rank0"] = max(alloc)
        out["peak_reserved_gib_rank0"] = max(r["memory/max_reserved_gib"] for r in steps)
    return out


def run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[int, float]:
    start = time.monotonic()
    with open(log, "w") as fh:
        code = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    return code, time.monotonic() - start


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--max-completion-length", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--dtype", default="bfloat16", help="float32 for a CPU smoke run (bf16 on CPU is very slow)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/launch-bench"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--logs", type=Path, default=None, help="folder to copy the run logs into")
    ap.add_argument("--no-baseline", action="store_true", help="skip the `trl grpo` baseline run")
    ns = ap.parse_args()

    import torch

    env = dict(os.environ)
    env.setdefault("PYTHON", sys.executable)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONUNBUFFERED="1")
    work = ns.workdir
    work.mkdir(parents=True, exist_ok=True)
    (work / "data").mkdir(exist_ok=True)
    rows = (REPO / "examples" / "json-person" / "data" / "train.jsonl").read_text().splitlines()
    (work / "data" / "train.jsonl").write_text("\n".join(rows) + "\n")
    t0 = time.monotonic()
    model_info = build_random_model(work / "model", "smollm2-135m")
    build_s = time.monotonic() - t0
    brief = work / "brief.yaml"
    brief.write_text(BRIEF.format(gpus=ns.gpus, steps=ns.steps, max_len=ns.max_completion_length, dtype=ns.dtype))
    synthetic_records(brief, "bench/launch_gpu.py")

    cli = [sys.executable, "-m", "llm_finetuning.cli"]
    gate = subprocess.run([*cli, "gate", str(brief)], capture_output=True, text=True, env=env)
    render = subprocess.run([*cli, "render", str(brief), "-o", str(work / "run")], capture_output=True, text=True,
                            env=env)
    result: dict[str, Any] = {
        "what": "finetune launch (transformers generation) vs trl grpo --config on the same rendered file",
        "model": {"shape": "SmolLM2-135M (published config)", "weights": "random (built from the config on "
                  "this machine; not the real SmolLM2 weights)", **model_info, "dtype": ns.dtype},
        "records": "SYNTHETIC: written through the records API by this script so the gate passes; a random-"
                   "weight model has no honest nonzero baseline",
        "settings": {"gpus": ns.gpus, "num_generations": 8, "per_device_train_batch_size": 8,
                     "gradient_accumulation_steps": 4, "max_completion_length": ns.max_completion_length,
                     "max_steps": ns.steps, "adapter": "full", "generation": "transformers",
                     "gradient_checkpointing": False},
        "machine": {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                    "gpus_visible": torch.cuda.device_count(), "torch": torch.__version__,
                    "python": platform.python_version()},
        "gate_exit": gate.returncode,
        "render_exit": render.returncode,
        "model_build_s": round(build_s, 1),
    }
    if gate.returncode or render.returncode:
        result["gate_output"] = gate.stdout[-3000:] + gate.stderr[-2000:]
        result["render_output"] = render.stdout[-2000:] + render.stderr[-2000:]
        ns.out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        return 1
    import transformers
    import trl

    result["machine"].update(transformers=transformers.__version__, trl=trl.__version__)
    completions_per_step = 8 * ns.gpus  # per_device_train_batch_size x processes (one micro-batch per step)
    # One optimizer step = gradient_accumulation_steps micro-batches of per_device x processes completions.
    completions_per_step *= 4

    with GpuMemoryPoller() as mem:
        code, wall = run([*cli, "launch", str(work / "run")], work, env, work / "launch.log")
    metrics = [json.loads(line) for line in (work / "run" / "metrics.jsonl").read_text().splitlines()] \
        if (work / "run" / "metrics.jsonl").is_file() else []
    result["finetune_launch"] = {"exit": code, "wall_s": round(wall, 1), "nvidia_smi_peak_used_gib": mem.gib(),
                                 **summarise(metrics, completions_per_step, ns.warmup),
                                 "final_checkpoint_committed": (work / "run" / "checkpoints" /
                                                                f"checkpoint-{ns.steps}" / "COMPLETE").is_file()}
    if not ns.no_baseline:
        base_dir = work / "run-trl"
        subprocess.run([*cli, "render", str(brief), "-o", str(base_dir)], capture_output=True, env=env, check=True)
        with GpuMemoryPoller() as mem:
            code, wall = run([sys.executable, "-m", "trl.cli.main", "grpo", "--config", "grpo_config.yaml"], base_dir,
                             {**env, "PYTHONPATH": f"{base_dir}:{env.get('PYTHONPATH', '')}"}, work / "trl.log")
        state_file = base_dir / "checkpoints" / f"checkpoint-{ns.steps}" / "trainer_state.json"
        history = json.loads(state_file.read_text())["log_history"] if state_file.is_file() else []
        # The checkpoint is saved before TRL logs its end-of-training summary; read that from the log.
        runtime = re.search(r"'train_runtime': '?([0-9.]+)", (work / "trl.log").read_text(errors="replace"))
        if runtime:
            history.append({"train_runtime": float(runtime.group(1))})
        result["trl_grpo_baseline"] = {"exit": code, "wall_s": round(wall, 1), "nvidia_smi_peak_used_gib": mem.gib(),
                                       **summarise(history, completions_per_step, ns.warmup)}
        a, b = result["finetune_launch"], result["trl_grpo_baseline"]
        if a.get("steps_per_s") and b.get("steps_per_s"):
            result["ratio_vs_trl_grpo"] = {
                "steps_per_s": round(a["steps_per_s"] / b["steps_per_s"], 3),
                "completion_tokens_per_s": round(a["completion_tokens_per_s"] / b["completion_tokens_per_s"], 3),
                "wall_s_whole_command": round(a["wall_s"] / b["wall_s"], 3)}
    if ns.logs:
        ns.logs.mkdir(parents=True, exist_ok=True)
        for name in ("launch.log", "trl.log"):
            if (work / name).is_file():
                (ns.logs / name).write_text((work / name).read_text(errors="replace")[-200000:])
        if (work / "run" / "metrics.jsonl").is_file():
            (ns.logs / "metrics.jsonl").write_text((work / "run" / "metrics.jsonl").read_text())
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["finetune_launch"]["exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
