"""GPU schedule benchmark: which learning-rate schedule should a brief default to?

On one CUDA GPU, through the gated pipeline (gate -> render -> launch -> diagnose), the embedded
SmolLM2-135M-Instruct trains on two tasks, each under three schedules (`grpo.lr_scheduler`) at the recipe's
learning rate (5e-7) and at a justified deviation (3e-5), same steps and seed:

- `json`: examples/smollm2-json (strict JSON object, a custom reward; its shipped inspection record);
- `arith`: examples/math-exact's one-digit additions (built-in `exact_match`, last number) on the embedded
  model. Its inspection record is sampled by `finetune inspect` and sealed by this script through the records
  API with every verdict `agree`, under the reviewer name "schedule_gpu.py (benchmark; no person reviewed)":
  a benchmark of the schedule, not a product run.

Schedules: `linear` (decay to 0, TRL's own default and what runs got before the brief decided it), `constant`,
and `cosine` with 10% warm-up. Each trained model and the base model are scored on held-out prompts at
temperatures 0.7 and 1.0 (pass@1 with a 95% interval over prompts). Ratios and differences are against the
`linear` run of the same task and learning rate, measured in the same call.

Phases, so that each fits one device call (the work folder persists in /tmp while the machine stays warm):

    python bench/schedule_gpu.py --phase prepare     # baselines (finetune baseline), arith's inspection
    python bench/schedule_gpu.py --phase recipe      # 6 runs at 5e-7, concurrently
    python bench/schedule_gpu.py --phase deviation   # 6 runs at 3e-5, each justified by its recipe run
    python bench/schedule_gpu.py --phase eval        # held-out pass@1 of 13 models x 2 temperatures, plot
Results: $OUT/schedule-h200.json (and -partial.json as it goes) and schedule-h200.png.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from launch_gpu import GpuMemoryPoller  # noqa: E402
from learning_gpu import finetune, read_metrics  # noqa: E402

TASKS = {"json": "examples/smollm2-json", "arith": "examples/math-exact"}
SCHEDULES = {"linear": ("linear", 0.0), "constant": ("constant", 0.0), "cosine-warmup": ("cosine", 0.1)}
RECIPE_LR = 5e-7
DEVIATION_LR = 3e-5
EVAL_TEMPERATURES = (0.7, 1.0)
REVIEWER = "schedule_gpu.py (benchmark; no person reviewed)"


def write_brief(task: str, work: Path, name: str, steps: int, lr: float, schedule: str,
                deviation: str | None) -> Path:
    src = REPO / TASKS[task] / "brief.yaml"
    data = yaml.safe_load(src.read_text(encoding="utf-8"))
    data["model"].update({"id": "embedded:smollm2-135m-instruct", "dtype": "bfloat16", "adapter": "full"})
    data["model"].pop("gguf_file", None)
    data["hardware"] = {"gpus": 1, "gpu_memory_gib": 139, "generation": "transformers"}
    lr_scheduler, warmup = SCHEDULES[schedule]
    data["grpo"].update({"learning_rate": lr, "lr_scheduler": lr_scheduler, "warmup_ratio": warmup,
                         "deviation": deviation, "max_steps": steps, "per_device_train_batch_size": 8,
                         "gradient_accumulation_steps": 4, "save_steps": steps, "logging_steps": 1,
                         "max_completion_length": 128, "seed": 3407})
    path = work / task / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def prepare(work: Path, out: Path, baseline_prompts: int) -> dict[str, Any]:
    from llm_finetuning.brief import load_brief
    from llm_finetuning.records.inspection import load_inspection, save_progress, seal, set_verdict

    if work.exists():
        shutil.rmtree(work)
    report: dict[str, Any] = {}
    for task, folder in TASKS.items():
        shutil.copytree(REPO / folder, work / task, ignore=shutil.ignore_patterns("runs", "evidence", "__pycache__",
                                                                                   "records"))
        brief = write_brief(task, work, "base", 40, RECIPE_LR, "constant", None)
        t0 = time.monotonic()
        finetune("baseline", str(brief), "--prompts", str(baseline_prompts), "--k", "8")
        if task == "json":
            shutil.copy(REPO / folder / "records/inspection.json", work / task / "records/inspection.json")
            shutil.copy(REPO / folder / "records/inspection.samples.jsonl",
                        work / task / "records/inspection.samples.jsonl")
        else:
            finetune("inspect", str(brief), "--samples", "64")
            loaded, _ = load_brief(brief)
            assert loaded is not None
            path = work / task / "records/inspection.json"
            record = load_inspection(path)
            for sample in record["samples"]:
                set_verdict(record, sample["id"], "agree", "benchmark record")
            save_progress(path, record)
            seal(path, REVIEWER)
        baseline = json.loads((work / task / "records/baseline.json").read_text())
        report[task] = {"baseline_seconds": round(time.monotonic() - t0, 1),
                        "baseline": {k: baseline.get(k) for k in ("pass_at_1", "pass_at_k", "k", "prompts")}}
        print(task, report[task], flush=True)
    save(out, "prepare", report)
    return report


def train(task: str, work: Path, name: str, lr: float, schedule: str, deviation: str | None, steps: int,
          out: Path) -> dict[str, Any]:
    brief = write_brief(task, work, name, steps, lr, schedule, deviation)
    run_dir = work / task / "runs" / name
    gate = finetune("gate", str(brief), expect=(0, 1))
    if gate != 0:
        return {"task": task, "name": name, "gate": "rejected"}
    finetune("render", str(brief), "-o", str(run_dir))
    t0 = time.monotonic()
    code = finetune("launch", str(run_dir), expect=(0, 1, 2))
    train_s = time.monotonic() - t0
    diag = subprocess.run([sys.executable, "-m", "llm_finetuning.cli", "diagnose", str(run_dir), "--json"],
                          capture_output=True, text=True, check=False)
    try:
        findings = [f["id"] for f in json.loads(diag.stdout)["findings"]]
    except (ValueError, KeyError):
        findings = ["(diagnose failed)"]
    metrics = read_metrics(run_dir)
    result = {"task": task, "name": name, "learning_rate": lr, "schedule": schedule, "deviation": deviation,
              "launch_exit": code, "train_seconds": round(train_s, 1), "steps": len(metrics),
              "healthy": diag.returncode == 0, "findings": findings,
              "reward_curve": [round(float(m["reward"]), 4) for m in metrics],
              "learning_rate_curve": [m.get("learning_rate") for m in metrics]}
    save(out, f"run-{task}-{name}", result)
    return result


def justifying_run(work: Path, task: str, schedule: str) -> str | None:
    """The recipe run of the same schedule when `finetune diagnose` called it healthy, else another healthy one."""
    runs = work / task / "runs"
    names = [f"recipe-{schedule}"] + [f"recipe-{s}" for s in SCHEDULES if s != schedule]
    for name in names:
        try:
            if json.loads((runs / name / "diagnosis.json").read_text()).get("healthy"):
                return f"runs/{name}"
        except (OSError, ValueError):
            continue
    return None


def run_phase(phase: str, work: Path, steps: int, out: Path) -> list[dict[str, Any]]:
    jobs = []
    for task in TASKS:
        for schedule in SCHEDULES:
            if phase == "recipe":
                jobs.append((task, f"recipe-{schedule}", RECIPE_LR, schedule, None))
            else:
                jobs.append((task, f"dev-{schedule}", DEVIATION_LR, schedule, justifying_run(work, task, schedule)))
    with GpuMemoryPoller() as mem, ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        t0 = time.monotonic()
        results = list(pool.map(lambda j: train(j[0], work, j[1], j[2], j[3], j[4], steps, out), jobs))
        wall = time.monotonic() - t0
    save(out, f"phase-{phase}", {"wall_seconds": round(wall, 1), "peak_gpu_memory_used_mib": max(mem.peak.values(),
                                                                                                  default=0),
                                  "concurrent_runs": len(jobs)})
    return results


def pass_at_1(brief_path: Path, model_dir: Path | None, temperature: float, n_prompts: int, k: int) -> dict[str, Any]:
    """Held-out pass@1 at `temperature` with a 95% interval over prompts (normal approximation)."""
    from llm_finetuning.brief import load_brief
    from llm_finetuning.sampling.metrics import is_success, verifier_names
    from llm_finetuning.sampling.run import sample_brief, score_run

    brief, errors = load_brief(brief_path)
    assert brief is not None, errors
    data = copy.deepcopy(brief.data)
    data["grpo"]["temperature"] = temperature
    if model_dir is not None:
        data["model"] = {**data["model"], "id": str(model_dir), "gguf_file": None, "revision": None}
    brief = replace(brief, data=data)
    run = sample_brief(brief, n_prompts=n_prompts, k=k, split="eval", backend="transformers",
                       desc=f"eval {model_dir or 'base'} T={temperature}")
    score_run(brief, run)
    names = list(run.prompts[0].scores[0]["rewards"])
    verifiers = verifier_names(brief.data["rewards"], names)
    per_prompt = [sum(is_success(s["rewards"], verifiers) for s in p.scores) / len(p.scores) for p in run.prompts]
    mean = statistics.fmean(per_prompt)
    half = 1.96 * statistics.stdev(per_prompt) / math.sqrt(len(per_prompt)) if len(per_prompt) > 1 else 0.0
    return {"pass_at_1": round(mean, 4), "ci95": [round(mean - half, 4), round(mean + half, 4)],
            "prompts": len(per_prompt), "k": k}


def evaluate(work: Path, out: Path, n_prompts: int, k: int) -> dict[str, Any]:
    jobs = []
    for task in TASKS:
        base = work / task / "base.yaml"
        for t in EVAL_TEMPERATURES:
            jobs.append((task, "base", base, None, t))
        for run_dir in sorted((work / task / "runs").iterdir()):
            if (run_dir / "model").is_dir():
                for t in EVAL_TEMPERATURES:
                    jobs.append((task, run_dir.name, base, run_dir / "model", t))
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=4) as pool:
        scored = list(pool.map(lambda j: (j[0], j[1], j[4], pass_at_1(j[2], j[3], j[4], n_prompts, k)), jobs))
    table: dict[str, Any] = {}
    for task, name, temperature, result in scored:
        table.setdefault(task, {}).setdefault(name, {})[f"T={temperature:g}"] = result
    save(out, "eval", {"seconds": round(time.monotonic() - t0, 1), "table": table})
    return table


def save(out: Path, key: str, value: Any) -> None:
    """Keep every result in $OUT/schedule-h200-partial.json as it comes, so a cut call still reports."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "schedule-h200-partial.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[key] = value
    path.write_text(json.dumps(data, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase", choices=["prepare", "recipe", "deviation", "eval"], required=True)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-prompts", type=int, default=96)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--baseline-prompts", type=int, default=48)
    parser.add_argument("--work", type=Path, default=Path("/tmp/schedule-bench"))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    args = parser.parse_args()
    import torch

    save(args.out, "machine", {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                               "torch": torch.__version__, "python": platform.python_version(),
                               "cpus": os.cpu_count()})
    if args.phase == "prepare":
        prepare(args.work, args.out, args.baseline_prompts)
    elif args.phase in ("recipe", "deviation"):
        for result in run_phase(args.phase, args.work, args.steps, args.out):
            print(json.dumps({k: v for k, v in result.items() if not k.endswith("_curve")}), flush=True)
    else:
        table = evaluate(args.work, args.out, args.eval_prompts, args.k)
        print(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
