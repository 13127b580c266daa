"""GPU step speed with transformers generation: `finetune launch` against `trl grpo --config`, same run.

On one CUDA GPU, the smollm2-json example's task (its data, its reward, G=8, batch 8 x 4, 128-token
completions, bf16, as bench/learning_gpu.py renders it) trains a model of a published shape with RANDOM
weights built on the machine: SmolLM2-135M's (the embedded model) and Qwen2.5-1.5B's. Random weights never
stop early, so every completion runs to 128 tokens: this measures speed; learning is bench/learning_gpu.py's
and bench/pipeline_vs_script_gpu.py's. The gate needs a sealed inspection and a nonzero baseline; for a
random model this script writes SYNTHETIC records through the records API (as bench/launch_gpu.py does).

Runs, each a fresh process, one at a time (the GPU to itself):
- `trl-defaults`: `trl grpo --config` on the file rendered with `hardware.compiled_generation: false`, which is
  TRL's own generation (a dynamic KV cache, eager decoding) and what every render gave before: the baseline;
- `trl-static`: `trl grpo --config` on today's render (`cache_implementation: static`, decoded uncompiled);
- `launch-eager`: `finetune launch` with `compiled_generation: false` (the previous render);
- `launch`: `finetune launch` on today's render (static cache, decoding compiled into CUDA graphs).
Seconds per step are measured over the steps after the warm-up (TRL's printed log lines are timestamped as
they arrive; `finetune launch` writes `elapsed_s` into metrics.jsonl), with ratios against `trl-defaults`.

    python bench/step_speed.py --out bench/results/step-speed-h200.json
    python bench/step_speed.py --plan smollm2-135m+lora:launch,smollm2-135m+lora:trl-defaults --measured-slow 3 \
        --out bench/results/step-speed-h200-lora.json     # LoRA (r 16, all linear layers)
    python bench/step_speed.py --plan tiny:trl-defaults,tiny:launch --measured 3 --dtype float32 \\
        --out /tmp/step-speed-cpu.json     # a CPU smoke run of the script itself
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from _synthetic import build_random_model, synthetic_records  # noqa: E402
from launch_gpu import GpuMemoryPoller  # noqa: E402

# name: (command, hardware.compiled_generation)
RUNS = {"trl-defaults": ("trl", False), "trl-static": ("trl", True), "launch-eager": ("launch", False),
        "launch": ("launch", True)}
COMPLETIONS_PER_STEP = 8 * 4
LOG_LINE = re.compile(r"\{'loss'")


def write_brief(work: Path, name: str, steps: int, compiled: bool, dtype: str, gpus: int, adapter: str) -> Path:
    data = yaml.safe_load((work / "brief.yaml").read_text(encoding="utf-8"))
    data["model"] = {"id": "./model", "dtype": dtype, "adapter": adapter}
    data["hardware"] = {"gpus": gpus, "gpu_memory_gib": 139, "generation": "transformers",
                        "compiled_generation": compiled}
    data["grpo"].pop("deviation", None)  # the recipe's learning rate needs no justifying run; speed ignores it
    data["grpo"].update({"max_steps": steps, "save_steps": 100000,  # no checkpoint: writing one is not a step
                         "logging_steps": 1, "learning_rate": 5e-7, "per_device_train_batch_size": 8,
                         "gradient_accumulation_steps": 4, "max_completion_length": 128})
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def timed_run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[int, float, list[float]]:
    """Run `cmd`, its output to `log`; the arrival times (seconds from start) of TRL's per-step log lines."""
    start = time.monotonic()
    stamps: list[float] = []
    with open(log, "w", encoding="utf-8") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace")
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            if LOG_LINE.search(line):
                stamps.append(time.monotonic() - start)
        code = proc.wait()
    return code, time.monotonic() - start, stamps


def per_step(times: list[float], lengths: list[float], warmup: int) -> dict[str, Any]:
    """Seconds per step and generated tokens/s over the steps after `warmup` (times: end of each step)."""
    if len(times) <= warmup + 1:
        return {"steps_logged": len(times)}
    span = times[-1] - times[warmup]
    steps = len(times) - 1 - warmup
    tokens = sum(lengths[warmup + 1:]) * COMPLETIONS_PER_STEP if lengths else 0.0
    return {"steps_logged": len(times), "steps_measured": steps, "warmup_steps": warmup + 1,
            "seconds_per_step": round(span / steps, 3),
            "generated_tokens_per_s": round(tokens / span, 1) if tokens else None,
            "first_steps_seconds": round(times[warmup], 1)}


def one_run(name: str, shape: str, work: Path, env: dict[str, str], warmup: int, measured: int, dtype: str,
            gpus: int, adapter: str) -> dict[str, Any]:
    command, compiled = RUNS[name]
    steps = warmup + 1 + measured
    brief = write_brief(work, f"{shape}-{name}", steps, compiled, dtype, gpus, adapter)
    cli = [sys.executable, "-m", "llm_finetuning.cli"]
    run_dir = work / "runs" / f"{shape}-{name}"
    shutil.rmtree(run_dir, ignore_errors=True)
    gate = subprocess.run([*cli, "gate", str(brief)], capture_output=True, text=True, env=env)
    if gate.returncode:
        return {"gate_exit": gate.returncode, "gate_output": (gate.stdout + gate.stderr)[-3000:]}
    subprocess.run([*cli, "render", str(brief), "-o", str(run_dir)], capture_output=True, env=env, check=True)
    rendered = yaml.safe_load((run_dir / "grpo_config.yaml").read_text(encoding="utf-8"))
    log = work / f"{shape}-{name}.log"
    with GpuMemoryPoller() as mem:
        if command == "trl":
            code, wall, stamps = timed_run([sys.executable, "-m", "trl.cli.main", "grpo", "--config", "grpo_config.yaml"],
                                           run_dir, {**env, "PYTHONPATH": f"{run_dir}:{env.get('PYTHONPATH', '')}"}, log)
            lengths = [float(m.group(1)) for m in re.finditer(r"'completions/mean_length': '?([0-9.]+)",
                                                                log.read_text(errors="replace"))]
        else:
            code, wall, _ = timed_run([*cli, "launch", str(run_dir)], work, env, log)
            metrics = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()] \
                if (run_dir / "metrics.jsonl").is_file() else []
            rows = [r for r in metrics if "elapsed_s" in r and "completions/mean_length" in r]
            stamps = [float(r["elapsed_s"]) for r in rows]
            lengths = [float(r["completions/mean_length"]) for r in rows]
    result: dict[str, Any] = {
        "command": "trl grpo --config grpo_config.yaml" if command == "trl" else "finetune launch",
        "compiled_generation": compiled, "cache_implementation": rendered.get("cache_implementation"),
        "exit": code, "wall_s": round(wall, 1), "max_steps": steps,
        "nvidia_smi_peak_used_gib": mem.gib(), **per_step(stamps, lengths, warmup)}
    if command == "launch" and metrics:
        alloc = [r["memory/max_allocated_gib"] for r in metrics if "memory/max_allocated_gib" in r]
        if alloc:
            result["peak_allocated_gib"] = max(alloc)
    if code:
        result["log_tail"] = log.read_text(errors="replace")[-3000:]
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", default=",".join(f"{shape}:{run}" for shape in ("smollm2-135m", "qwen2.5-1.5b")
                                               for run in ("trl-defaults", "launch", "trl-static", "launch-eager")),
                    help="SHAPE:RUN,... in the order to run them")
    ap.add_argument("--warmup", type=int, default=2, help="steps left out before timing (compile happens in step 1)")
    ap.add_argument("--measured", type=int, default=20, help="timed steps of the fast runs")
    ap.add_argument("--measured-slow", type=int, default=8,
                    help="timed steps of the eager runs (their step time is steady; the device call is short)")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--work", type=Path, default=Path("/tmp/step-speed"))
    ap.add_argument("--out", type=Path, required=True)
    ns = ap.parse_args()

    import torch
    import transformers
    import trl

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
    gpus = 1 if torch.cuda.is_available() else 0
    result: dict[str, Any] = {
        "benchmark": "step_speed", "task": "examples/smollm2-json (data and reward; G=8, batch 8 x 4, 128 tokens)",
        "weights": "random, built from each shape's published config on this machine",
        "records": "SYNTHETIC (records API): a random-weight model has no honest baseline",
        "machine": {"gpu": torch.cuda.get_device_name(0) if gpus else None, "torch": torch.__version__,
                    "transformers": transformers.__version__, "trl": trl.__version__,
                    "python": platform.python_version(), "cpus": os.cpu_count()},
        "warmup_steps": ns.warmup + 1, "shapes": {}}
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    models: dict[str, dict[str, Any]] = {}
    for item in ns.plan.split(","):
        key, name = item.split(":")  # SHAPE or SHAPE+lora
        shape, _, adapter = key.partition("+")
        adapter = adapter or "full"
        work = ns.work / shape
        if shape not in models:
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(REPO / "examples/smollm2-json", work,
                            ignore=shutil.ignore_patterns("runs", "evidence", "records", "__pycache__"))
            t0 = time.monotonic()
            models[shape] = {**build_random_model(work / "model", shape, "bfloat16"), "build_s": round(time.monotonic() - t0, 1)}
            synthetic_records(write_brief(work, "records", 1, True, ns.dtype, gpus, adapter), "bench/step_speed.py")
        entry = result["shapes"].setdefault(key, {"model": models[shape], "adapter": adapter, "runs": {}})
        measured = ns.measured if RUNS[name][1] and RUNS[name][0] == "launch" else ns.measured_slow
        print(f"== {key} {name}", flush=True)
        entry["runs"][name] = one_run(name, shape, work, env, ns.warmup, measured, ns.dtype, gpus, adapter)
        base = entry["runs"].get("trl-defaults", {}).get("seconds_per_step")
        for run in entry["runs"].values():
            if base and run.get("seconds_per_step"):
                run["speedup_vs_trl_defaults"] = round(base / run["seconds_per_step"], 2)
        print(json.dumps(entry["runs"][name], indent=1)[:1500], flush=True)
        ns.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")  # kept as it goes
    return 0


if __name__ == "__main__":
    sys.exit(main())
