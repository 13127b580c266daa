"""Do the step-time levers learn the same? The learning benchmark's task and steps, rendered as today.

bench/step_profile.py measured three levers faster on one H200: compiled decoding (full fine-tuning, and now
LoRA), the heap frozen after the first step, and the shared compile cache. A lever stays only when the run
also learns the same. On one CUDA GPU, with examples/smollm2-json and the embedded SmolLM2-135M-Instruct:

1. `finetune baseline` on the held-out split (--eval-prompts x --k, as bench/learning_gpu.py);
2. three runs of the learning benchmark's shape (G=8, batch 8 x 4, 128-token completions, --steps), trained
   concurrently on the GPU through gate, render, launch, `finetune eval`, then diagnose (which reads eval.json):
   - `full-render`: full fine-tuning at 3e-5, rendered as today (compiled decoding and every lever). Its
     held-out pass@1 is checked against the hand-written TRL script of bench/results/pipeline-vs-script-h200.json
     (plain GRPOTrainer: eager decoding, no heap freeze, no compile cache; the same task, steps, seed, constant
     schedule and held-out protocol): that figure must lie inside this run's 95% interval;
   - `lora-compiled` and `lora-eager`: LoRA at --lora-lr, compiled decoding against eager decoding
     (`hardware.compiled_generation`), the same seed. Their trained per-prompt rates are paired on the same
     prompts: the lever learns the same when the paired 95% interval of compiled - eager holds zero.
Results go to --out (default $OUT or bench/results): levers-learning-h200.json, each run's eval.json and
diagnosis.json.

    python bench/levers_learning_gpu.py --steps 40 --eval-prompts 96 --k 4 --lora-lr 3e-4
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
from learning_gpu import train_and_measure, write_brief  # noqa: E402

from llm_finetuning.evaluation.paired import paired_difference  # noqa: E402

EXAMPLE = REPO / "examples/smollm2-json"
# Its `script` run: plain TRL on the same task, steps, seed and schedule, with none of the levers. (learning-h200.json's
# lr-3e-05 run also predates them, but it trained on TRL's linear schedule, 9.9 points below constant on this task.)
BEFORE_LEVERS = REPO / "bench/results/pipeline-vs-script-h200.json"


def lever_brief(work: Path, name: str, steps: int, learning_rate: float, adapter: str,
                compiled: bool | None) -> Path:
    """The learning benchmark's brief, with the adapter and (when not None) decoding forced either way."""
    path = write_brief(EXAMPLE / "brief.yaml", work / f"{name}.yaml", steps, learning_rate, "evidence/recipe-h200")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["model"]["adapter"] = adapter
    if compiled is not None:
        data["hardware"]["compiled_generation"] = compiled
    data["output_dir"] = f"runs/{name}"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def against_before_levers(full: list[float], reference: dict[str, Any]) -> dict[str, Any]:
    """Today's full fine-tuning run against the levers-free script: is the script's pass@1 inside our interval?"""
    before = reference["held_out"]["table"]["script"]["T=0.7"]
    low, high = interval(full)
    return {"before_levers": "the hand-written TRL script of pipeline-vs-script-h200.json (eager decoding, no heap "
                             "freeze, no compile cache)",
            "before_levers_pass_at_1": before["pass_at_1"], "before_levers_ci95": before["ci95"],
            "today_pass_at_1": round(sum(full) / len(full), 4), "today_ci95": [low, high],
            "same": low <= before["pass_at_1"] <= high}


def rates(run_dir: Path, k: int) -> list[float]:
    evaluation = json.loads((run_dir / "eval.json").read_text(encoding="utf-8"))
    return [s / k for s in evaluation["per_prompt"]["trained"]]


def interval(values: list[float]) -> tuple[float, float]:
    """The 95% t interval of a mean of per-prompt rates (paired against zero)."""
    diff = paired_difference([0.0] * len(values), values)
    return round(diff.ci95[0], 4), round(diff.ci95[1], 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-prompts", type=int, default=96)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--full-lr", type=float, default=3e-5)
    parser.add_argument("--lora-lr", type=float, default=3e-4)
    parser.add_argument("--work", type=Path, default=Path("/tmp/levers-bench"))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    args = parser.parse_args()

    import torch

    started = time.monotonic()
    work = args.work
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    runs = {"full-render": lever_brief(work, "full-render", args.steps, args.full_lr, "full", None),
            "lora-compiled": lever_brief(work, "lora-compiled", args.steps, args.lora_lr, "lora", True),
            "lora-eager": lever_brief(work, "lora-eager", args.steps, args.lora_lr, "lora", False)}

    finetune("baseline", str(runs["full-render"]), "--prompts", str(args.eval_prompts), "--k", str(args.k))
    base = float(json.loads((work / "records/baseline.json").read_text(encoding="utf-8"))["pass_at_1"])
    print(f"base held-out pass@1: {base:.3f}", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        futures = {name: pool.submit(train_and_measure, name, brief, work / "runs" / name, args.out)
                   for name, brief in runs.items()}
        measured = {name: future.result() for name, future in futures.items()}
    for name in runs:
        for file in ("eval.json", "diagnosis.json", "metrics.jsonl"):
            if (work / "runs" / name / file).is_file():
                shutil.copy(work / "runs" / name / file, args.out / f"levers-{name}-{file}")

    full = rates(work / "runs/full-render", args.k)
    compiled, eager = rates(work / "runs/lora-compiled", args.k), rates(work / "runs/lora-eager", args.k)
    lora = paired_difference(eager, compiled)
    results: dict[str, Any] = {
        "benchmark": "levers_learning_gpu", "example": "examples/smollm2-json",
        "model": "embedded:smollm2-135m-instruct", "generation": "transformers",
        "machine": {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                    "torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count()},
        "steps": args.steps, "eval_prompts": args.eval_prompts, "k": args.k, "held_out_pass_at_1_base": base,
        "runs": list(measured.values()),
        "full_against_before_levers": against_before_levers(
            full, json.loads(BEFORE_LEVERS.read_text(encoding="utf-8"))),
        "lora_compiled_against_eager": {
            "delta_pass_at_1": round(lora.delta, 4), "ci95": [round(lora.ci95[0], 4), round(lora.ci95[1], 4)],
            "same": not lora.beyond_noise,
            "seconds_per_step": {name: round(1 / measured[name]["steps_per_second"], 2)
                                 for name in ("lora-compiled", "lora-eager")}},
        "note": "the three runs trained concurrently on one GPU, so their seconds per step are slower than alone; "
                "bench/step_profile.py times steps alone",
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    (args.out / "levers-learning-h200.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in results.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
