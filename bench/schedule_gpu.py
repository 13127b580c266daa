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
    python bench/schedule_gpu.py --phase eval        # held-out pass@1 of 14 models x 2 temperatures
    python bench/schedule_gpu.py --phase report --partials P1 P2 ... --out bench/results
Each phase adds to $OUT/schedule-h200-partial.json; `report` merges the partial files of the calls into
bench/results/schedule-h200.json and schedule-h200.png.
"""

from __future__ import annotations

import argparse
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
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from _cli import finetune  # noqa: E402
from _synthetic import seal_synthetic  # noqa: E402
from launch_gpu import GpuMemoryPoller  # noqa: E402
from learning_gpu import read_metrics  # noqa: E402

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
    from llm_finetuning.records.inspection import load_inspection, save_progress, set_verdict

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
            path = work / task / "records/inspection.json"
            record = load_inspection(path)
            for sample in record["samples"]:
                set_verdict(record, sample["id"], "agree", "benchmark record")
            save_progress(path, record)
            seal_synthetic(path, REVIEWER)
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
    gate = finetune("gate", str(brief), expect=(0, 1)).code
    if gate != 0:
        return {"task": task, "name": name, "gate": "rejected"}
    finetune("render", str(brief), "-o", str(run_dir))
    t0 = time.monotonic()
    code = finetune("launch", str(run_dir), expect=(0, 1, 2)).code
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
    data = brief.as_mapping()
    data["grpo"]["temperature"] = temperature
    if model_dir is not None:
        data["model"] = {**data["model"], "id": str(model_dir), "gguf_file": None, "revision": None}
    brief = brief.replaced(data)
    run = sample_brief(brief, n_prompts=n_prompts, k=k, split="eval", backend="transformers",
                       desc=f"eval {model_dir or 'base'} T={temperature}")
    score_run(brief, run)
    names = list(run.prompts[0].scores[0]["rewards"])
    verifiers = [n for n in verifier_names(brief.rewards) if n in names]
    per_prompt = [sum(is_success(s["rewards"], verifiers) for s in p.scores) / len(p.scores) for p in run.prompts]
    mean = statistics.fmean(per_prompt)
    half = 1.96 * statistics.stdev(per_prompt) / math.sqrt(len(per_prompt)) if len(per_prompt) > 1 else 0.0
    return {"pass_at_1": round(mean, 4), "ci95": [round(mean - half, 4), round(mean + half, 4)],
            "prompts": len(per_prompt), "k": k}


def eval_jobs(work: Path) -> list[tuple[str, str, str | None, float]]:
    """(task, model name, model folder or None for the base, temperature) for every model to score."""
    jobs: list[tuple[str, str, str | None, float]] = []
    for task in TASKS:
        models: list[tuple[str, str | None]] = [("base", None)]
        models += [(d.name, str(d / "model")) for d in sorted((work / task / "runs").iterdir()) if (d / "model").is_dir()]
        jobs += [(task, name, model, t) for name, model in models for t in EVAL_TEMPERATURES]
    return jobs


def eval_shard(work: Path, shard: int, shards: int, n_prompts: int, k: int) -> None:
    """Score every `shards`-th job in this process (model loading is not thread-safe: one process a shard)."""
    results = []
    for task, name, model, temperature in eval_jobs(work)[shard::shards]:
        result = pass_at_1(work / task / "base.yaml", Path(model) if model else None, temperature, n_prompts, k)
        results.append({"task": task, "name": name, "temperature": temperature, **result})
        (work / f"eval-shard-{shard}.json").write_text(json.dumps(results, indent=1))


def evaluate(work: Path, out: Path, n_prompts: int, k: int, shards: int = 4) -> dict[str, Any]:
    t0 = time.monotonic()
    procs = [subprocess.Popen([sys.executable, __file__, "--phase", "eval-shard", "--shard", str(i),
                               "--shards", str(shards), "--work", str(work), "--eval-prompts", str(n_prompts),
                               "--k", str(k), "--out", str(out / f"shard-{i}")]) for i in range(shards)]
    codes = [p.wait() for p in procs]
    table: dict[str, Any] = {}
    for i in range(shards):
        path = work / f"eval-shard-{i}.json"
        for r in json.loads(path.read_text()) if path.is_file() else []:
            table.setdefault(r["task"], {}).setdefault(r["name"], {})[f"T={r['temperature']:g}"] = {
                key: r[key] for key in ("pass_at_1", "ci95", "prompts", "k")}
    save(out, "eval", {"seconds": round(time.monotonic() - t0, 1), "shard_exit_codes": codes, "table": table})
    return table


def report(partials: list[Path], out: Path) -> dict[str, Any]:
    """Merge the phases' partial results (one file per device call) into schedule-h200.json and a plot."""
    merged: dict[str, Any] = {}
    for path in partials:
        merged.update(json.loads(path.read_text()))
    table = merged["eval"]["table"]
    runs = {key[4:]: value for key, value in merged.items() if key.startswith("run-")}
    summary = []
    for task in TASKS:
        base = table[task]["base"]
        for lr_name, lr in (("recipe", RECIPE_LR), ("dev", DEVIATION_LR)):
            linear = table[task][f"{lr_name}-linear"]
            for schedule in SCHEDULES:
                name = f"{lr_name}-{schedule}"
                run = runs.get(f"{task}-{name}", {})
                row = {"task": task, "learning_rate": lr, "schedule": schedule, "healthy": run.get("healthy"),
                       "findings": run.get("findings"), "train_seconds": run.get("train_seconds")}
                for t in ("T=0.7", "T=1"):
                    row[t] = table[task][name][t]
                    row[f"gain_points_{t}"] = round((table[task][name][t]["pass_at_1"] - base[t]["pass_at_1"]) * 100, 1)
                    row[f"vs_linear_points_{t}"] = round(
                        (table[task][name][t]["pass_at_1"] - linear[t]["pass_at_1"]) * 100, 1)
                summary.append(row)
    result = {"benchmark": "schedule_gpu", "model": "embedded:smollm2-135m-instruct", "generation": "transformers",
              "steps": 40, "batch": "G=8, 8 x 4 per step", "max_completion_length": 128, "seed": 3407,
              "machine": merged.get("machine"), "prepare": merged.get("prepare"),
              "phases": {k: v for k, v in merged.items() if k.startswith("phase-")},
              "base": {task: table[task]["base"] for task in TASKS}, "runs": summary,
              "reward_curves": {k: v.get("reward_curve") for k, v in runs.items()},
              "note": ("each phase's six runs trained concurrently on one GPU; the arith task's inspection record was "
                       f"sealed by this benchmark ({REVIEWER!r}), the json task's is the example's reviewed record")}
    out.mkdir(parents=True, exist_ok=True)
    (out / "schedule-h200.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, out / "schedule-h200.png")
    from _schedule_table import PAGE, page_with_table

    PAGE.write_text(page_with_table(PAGE.read_text(), result))
    return result


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, task in zip(axes, TASKS, strict=True):
        rows = [r for r in result["runs"] if r["task"] == task and r["learning_rate"] == DEVIATION_LR]
        labels = ["base"] + [r["schedule"] for r in rows]
        for offset, t in ((-0.2, "T=0.7"), (0.2, "T=1")):
            values = [result["base"][task][t]] + [r[t] for r in rows]
            means = [v["pass_at_1"] * 100 for v in values]
            errs = [[m - v["ci95"][0] * 100 for m, v in zip(means, values, strict=True)],
                    [v["ci95"][1] * 100 - m for m, v in zip(means, values, strict=True)]]
            ax.bar([i + offset for i in range(len(labels))], means, 0.4, yerr=errs, capsize=3,
                   label=f"sampled at {t.replace('T=', 'T ')}")
        ax.set_xticks(range(len(labels)), labels)
        ax.set_ylim(0, 105)
        ax.set_ylabel("held-out pass@1 (%)")
        ax.set_title(f"{task}: 40 steps at 3e-5")
        ax.legend(loc="upper left")
    fig.suptitle("Learning-rate schedule, SmolLM2-135M-Instruct through the gated pipeline, one H200")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def save(out: Path, key: str, value: Any, name: str = "schedule-h200-partial.json") -> None:
    """Keep every result in $OUT/`name` as it comes, so a cut call still reports."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[key] = value
    path.write_text(json.dumps(data, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase", choices=["prepare", "recipe", "deviation", "eval", "eval-shard", "report"],
                        required=True)
    parser.add_argument("--partials", type=Path, nargs="*", default=[],
                        help="report: the partial result files of the phases, in order")
    parser.add_argument("--shard", type=int, default=0)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-prompts", type=int, default=96)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--baseline-prompts", type=int, default=48)
    parser.add_argument("--work", type=Path, default=Path("/tmp/schedule-bench"))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    args = parser.parse_args()
    if args.phase == "report":
        result = report(args.partials, args.out)
        for r in result["runs"]:
            print(f"{r['task']:5} lr {r['learning_rate']:g} {r['schedule']:14} T=0.7 {r['T=0.7']['pass_at_1']:.1%} "
                  f"({r['vs_linear_points_T=0.7']:+.1f} vs linear)  T=1 {r['T=1']['pass_at_1']:.1%} "
                  f"({r['vs_linear_points_T=1']:+.1f})  {'healthy' if r['healthy'] else r['findings']}")
        return
    import torch

    save(args.out, "machine", {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                               "torch": torch.__version__, "python": platform.python_version(),
                               "cpus": os.cpu_count()})
    if args.phase == "prepare":
        prepare(args.work, args.out, args.baseline_prompts)
    elif args.phase in ("recipe", "deviation"):
        for result in run_phase(args.phase, args.work, args.steps, args.out):
            print(json.dumps({k: v for k, v in result.items() if not k.endswith("_curve")}), flush=True)
    elif args.phase == "eval-shard":
        eval_shard(args.work, args.shard, args.shards, args.eval_prompts, args.k)
    else:
        table = evaluate(args.work, args.out, args.eval_prompts, args.k, args.shards)
        print(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
