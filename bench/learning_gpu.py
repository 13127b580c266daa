"""GPU learning benchmark: GRPO through the gated pipeline measurably improves SmolLM2-135M-Instruct.

Runs on one CUDA GPU, with the example examples/smollm2-json (strict JSON reward, the embedded model):
1. `finetune baseline` on the held-out split (the example's baseline record: the base model's held-out
   pass@1, and each prompt's successes that `finetune eval` pairs with);
2. the seed recipe's exact settings (learning_rate 5e-7, beta 0.01, G=8, batch 8 x 4): gate, render,
   launch, diagnose, `finetune eval` -- the baseline run of this benchmark;
3. the justified deviations (learning_rate 1e-5 and 3e-5, `grpo.deviation` naming run 2, which was
   diagnosed healthy): gate, render, launch, diagnose, `finetune eval` -- the two runs share the GPU
   concurrently (a 135M model leaves the H200 mostly idle), so their peak memory is reported together.
Both runs use transformers generation (vLLM cannot be installed on the machines this was run on).
Figures are ratios and differences against the recipe run measured in the same call. Results go to
$OUT (or --out): learning-h200.json, learning-h200.png and each run's metrics/diagnosis.

    python bench/learning_gpu.py --steps 60 --eval-prompts 128 --k 4 --deviation-lrs 1e-5,3e-5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from _cli import finetune  # noqa: E402
from launch_gpu import GpuMemoryPoller  # noqa: E402  (nvidia-smi peak per GPU, shared with that bench)


def write_brief(src: Path, dst: Path, steps: int, learning_rate: float, deviation: str | None,
                max_completion_length: int = 128) -> Path:
    data = yaml.safe_load(src.read_text(encoding="utf-8"))
    data["model"]["dtype"] = "bfloat16"
    data["hardware"] = {"gpus": 1, "gpu_memory_gib": 139, "generation": "transformers"}
    data["grpo"].update({"learning_rate": learning_rate, "deviation": deviation, "max_steps": steps,
                         "per_device_train_batch_size": 8, "gradient_accumulation_steps": 4,
                         "save_steps": steps, "logging_steps": 1,
                         "max_completion_length": max_completion_length})
    dst.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return dst


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if "reward" in r]


PARTIAL: list[dict[str, Any]] = []


def save_partial(out: Path, item: dict[str, Any]) -> None:
    """Keep what finished so far in $OUT, so a call cut at its time limit still reports it."""
    PARTIAL.append(item)
    out.mkdir(parents=True, exist_ok=True)
    (out / "learning-partial.json").write_text(json.dumps(PARTIAL, indent=2) + "\n", encoding="utf-8")


def train_and_measure(name: str, brief: Path, run_dir: Path, out: Path | None = None) -> dict[str, Any]:
    finetune("gate", str(brief), expect=(0,))
    finetune("render", str(brief), "-o", str(run_dir))
    with GpuMemoryPoller() as mem:
        t0 = time.monotonic()
        finetune("launch", str(run_dir))
        train_s = time.monotonic() - t0
    t0 = time.monotonic()
    eval_code = finetune("eval", str(run_dir), expect=(0, 1)).code  # the baseline record's prompts and settings
    eval_s = time.monotonic() - t0
    # after eval: diagnose reads eval.json's held-out score to tell convergence from entropy collapse
    diag_code = finetune("diagnose", str(run_dir), "--json", expect=(0, 1)).code
    evaluation = json.loads((run_dir / "eval.json").read_text(encoding="utf-8"))
    metrics = read_metrics(run_dir)
    steps = len(metrics)
    completions_per_step = 8 * 4
    tokens = sum(float(m.get("completions/mean_length", 0.0)) * completions_per_step for m in metrics)
    result = {
        "name": name, "brief": yaml.safe_load(brief.read_text(encoding="utf-8"))["grpo"],
        "train_seconds": round(train_s, 1), "steps": steps,
        "steps_per_second": round(steps / train_s, 3) if train_s else None,
        "completion_tokens_per_second": round(tokens / train_s, 1) if train_s else None,
        "peak_gpu_memory_used_mib": max(mem.peak.values(), default=0), "diagnose_exit_code": diag_code,
        "held_out_pass_at_1_after": evaluation["trained"]["pass_at_1"],
        "held_out_pass_at_k_after": evaluation["trained"]["pass_at_k"],
        "delta_pass_at_1_ci95": evaluation["ci95"], "better_beyond_noise": eval_code == 0,
        "eval_seconds": round(eval_s, 1),
        "reward_curve": [round(float(m["reward"]), 4) for m in metrics],
    }
    if out is not None:
        save_partial(out, result)
    return result


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for run in results["runs"]:
        curve = run["reward_curve"]
        window = 5
        smooth = [sum(curve[max(0, i - window + 1): i + 1]) / len(curve[max(0, i - window + 1): i + 1])
                  for i in range(len(curve))]
        ax1.plot(range(1, len(curve) + 1), smooth, label=f"{run['name']} (lr {run['brief']['learning_rate']:g})")
    ax1.set_xlabel("step")
    ax1.set_ylabel("training reward (mean of 32, 5-step moving avg)")
    ax1.set_title("Training reward")
    ax1.legend()
    labels = ["base"] + [r["name"] for r in results["runs"]]
    values = [results["held_out_pass_at_1_base"]] + [r["held_out_pass_at_1_after"] for r in results["runs"]]
    ax2.bar(labels, [v * 100 for v in values], color=["#888", "#4c72b0", "#dd8452", "#55a868"][: len(values)])
    for i, v in enumerate(values):
        ax2.text(i, v * 100 + 1, f"{v:.0%}", ha="center")
    ax2.set_ylim(0, 105)
    ax2.set_ylabel("held-out pass@1 (%)")
    ax2.set_title(f"Held-out ({results['eval_prompts']} prompts x {results['k']})")
    fig.suptitle("SmolLM2-135M-Instruct, strict JSON task, GRPO on one H200")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--eval-prompts", type=int, default=128)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--deviation-lrs", default="1e-5,3e-5")
    parser.add_argument("--work", type=Path, default=Path("/tmp/learning-bench"))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    args = parser.parse_args()

    import torch

    started = time.monotonic()
    example = REPO / "examples/smollm2-json"
    work = args.work
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(example, work, ignore=shutil.ignore_patterns("runs", "evidence", "__pycache__"))
    recipe = write_brief(example / "brief.yaml", work / "recipe.yaml", args.steps, 5e-7, None)

    finetune("baseline", str(recipe), "--prompts", str(args.eval_prompts), "--k", str(args.k))
    args.out.mkdir(parents=True, exist_ok=True)
    shutil.copy(work / "records/baseline.json", args.out / "baseline.json")
    base = float(json.loads((work / "records/baseline.json").read_text(encoding="utf-8"))["pass_at_1"])
    print(f"base held-out pass@1: {base:.3f}", flush=True)
    save_partial(args.out, {"held_out_pass_at_1_base": base})

    runs = [train_and_measure("recipe", recipe, work / "runs/recipe-h200", args.out)]
    evidence = args.out / "recipe-h200"
    evidence.mkdir(exist_ok=True)
    for name in ("metrics.jsonl", "diagnosis.json"):
        if (work / "runs/recipe-h200" / name).is_file():
            shutil.copy(work / "runs/recipe-h200" / name, evidence / name)
    lrs = [float(x) for x in args.deviation_lrs.split(",") if x.strip()]
    jobs = []
    for lr in lrs:
        name = f"lr-{lr:g}"
        brief = write_brief(example / "brief.yaml", work / f"{name}.yaml", args.steps, lr, "runs/recipe-h200")
        jobs.append((name, brief, work / f"runs/{name}-h200"))
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = [pool.submit(train_and_measure, n, b, r, args.out) for n, b, r in jobs]
        runs += [f.result() for f in futures]

    results = {
        "benchmark": "learning_gpu", "example": "examples/smollm2-json", "model": "embedded:smollm2-135m-instruct",
        "generation": "transformers", "machine": {
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count()},
        "eval_prompts": args.eval_prompts, "k": args.k, "held_out_pass_at_1_base": base, "runs": runs,
        "gain_points": {r["name"]: round((r["held_out_pass_at_1_after"] - base) * 100, 1) for r in runs},
        "gain_over_recipe_points": {r["name"]: round(
            (r["held_out_pass_at_1_after"] - runs[0]["held_out_pass_at_1_after"]) * 100, 1) for r in runs[1:]},
        "note": "the deviation runs trained concurrently on one GPU; their peak memory is the pair's",
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "learning-h200.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    plot(results, args.out / "learning-h200.png")
    print(json.dumps({k: v for k, v in results.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
