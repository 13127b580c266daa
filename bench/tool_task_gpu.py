"""Tool-use benchmark: the gated pipeline on a multi-turn tool task (examples/calculator-tools).

On one CUDA GPU, with the embedded SmolLM2-135M-Instruct given Qwen2.5's ChatML tool template by the brief:
1. `finetune baseline` on the held-out split: the base model's episodes (call multiply, answer the number),
   held-out pass@1 and each prompt's successes that `finetune eval` pairs with;
2. `finetune inspect`, then a test-only seal: every verdict "agree", sealed as the reviewer
   "bench (test-only, no person read these)", the way the tests build sealed records. It stands in for a
   person's review so the pipeline can run unattended; a real run needs `finetune review`;
3. the recipe run (learning_rate 5e-7): gate, render, launch, diagnose;
4. the deviation run (learning_rate --lr, `grpo.deviation` naming run 3 when it was diagnosed healthy):
   gate, render, launch, `finetune eval` (held-out pass@1 before and after, the paired 95% interval),
   then diagnose, which reads that held-out score. Both runs use transformers generation.
Results go to --out (default $OUT or bench/results): tool-task-h200.json and each run's diagnosis, with
the metrics.jsonl and eval.json it read (tool-task-RUN-metrics.jsonl, tool-task-RUN-eval.json).

    python bench/tool_task_gpu.py --steps 40 --eval-prompts 64 --k 4 --lr 3e-5
    python bench/tool_task_gpu.py --smoke     # CPU, the tiny random model, 2 steps: the machinery only

`--smoke` proves the commands chain (a tiny random model learns nothing; its figures mean nothing) and
writes tool-task-smoke.json instead.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from _cli import finetune  # noqa: E402

EXAMPLE = REPO / "examples/calculator-tools"
TEST_ONLY_REVIEWER = "bench (test-only, no person read these)"


def save_partial(out: Path, stage: str, value: Any) -> None:
    """What finished so far, in --out, so a call cut at its time limit still reports it."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "tool-task-partial.json"
    done = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    done[stage] = value
    path.write_text(json.dumps(done, indent=2) + "\n", encoding="utf-8")


def write_brief(dst: Path, *, steps: int, learning_rate: float, deviation: str | None, smoke: bool,
                model_id: str | None) -> Path:
    data = yaml.safe_load((EXAMPLE / "brief.yaml").read_text(encoding="utf-8"))
    if model_id:
        data["model"]["id"] = model_id
    grpo = {"learning_rate": learning_rate, "deviation": deviation, "max_steps": steps, "save_steps": steps,
            "logging_steps": 1}
    if smoke:
        data["model"]["dtype"] = "float32"
        grpo.update(per_device_train_batch_size=8, gradient_accumulation_steps=1, max_completion_length=16)
        data["hardware"] = {"gpus": 0, "generation": "transformers"}
    else:
        data["model"]["dtype"] = "bfloat16"
        grpo.update(per_device_train_batch_size=8, gradient_accumulation_steps=4)
        data["hardware"] = {"gpus": 1, "gpu_memory_gib": 139, "generation": "transformers"}
    data["grpo"].update(grpo)
    data["output_dir"] = f"runs/{dst.stem}"
    dst.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return dst


def seal_for_tests(record: Path) -> None:
    """Every verdict "agree" and the seal, under a reviewer name that says no person looked."""
    from llm_finetuning.records import inspection

    rec = inspection.load_inspection(record)
    for s in rec["samples"]:
        inspection.set_verdict(rec, s["id"], "agree", "test-only", None)
    inspection.save_progress(record, rec)
    inspection.seal(record, TEST_ONLY_REVIEWER)


def synthetic_baseline(brief_path: Path) -> None:
    """Smoke mode only: a random-weight model never succeeds, so the gate would refuse it; a baseline record
    labelled synthetic (as bench/_synthetic.py writes them) stands in for the gate, render and launch."""
    from llm_finetuning.brief import load_brief
    from llm_finetuning.models import model_identity
    from llm_finetuning.records import baseline

    brief, errors = load_brief(brief_path)
    assert brief is not None, errors
    names = brief.reward_names
    baseline.write_baseline(brief.resolve(brief.records.baseline), baseline.make_baseline(
        brief, model_identity=model_identity(brief.model, brief.folder),
        prompts={"source": "data/eval.jsonl", "count": 4, "indices": list(range(4))}, k=2, pass_at_1=0.25,
        pass_at_k=0.5, mean_reward=dict.fromkeys(names, 0.25), frac_groups_all_tie=0.5, frac_truncated=0.0,
        synthetic="tool_task_gpu --smoke: written so the gate passes on a random-weight model"))


def episode_figures(samples_file: Path) -> dict[str, Any]:
    """Tool use in the inspected episodes: calls, failures, turns and episodes cut at the limit."""
    rows = [json.loads(line) for line in samples_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    eps = [r["episode"] for r in rows if isinstance(r.get("episode"), dict)]
    n = max(1, len(eps))
    calls = sum(e["tool_calls"] for e in eps)
    return {"episodes": len(eps), "tool_calls_per_episode": round(calls / n, 3),
            "tool_failure_rate": round(sum(e["tool_failures"] for e in eps) / calls, 3) if calls else None,
            "turns_per_episode": round(sum(e["turns"] for e in eps) / n, 3),
            "cut_at_limit": round(sum(bool(e["cut_at_limit"]) for e in eps) / n, 3)}


def train(brief: Path, run_dir: Path, evaluate: bool) -> dict[str, Any]:
    finetune("gate", str(brief), expect=(0,))
    finetune("render", str(brief), "-o", str(run_dir))
    t0 = time.monotonic()
    finetune("launch", str(run_dir))
    train_s = time.monotonic() - t0
    # held-out scores first: diagnose reads eval.json to tell convergence from entropy collapse
    held_out = evaluate_run(run_dir) if evaluate else {}
    diag_code = finetune("diagnose", str(run_dir), "--json", expect=(0, 1)).code
    diagnosis = json.loads((run_dir / "diagnosis.json").read_text(encoding="utf-8"))
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
               if line.strip()]
    metrics = [m for m in metrics if "reward" in m]
    out: dict[str, Any] = {
        "brief_grpo": yaml.safe_load(brief.read_text(encoding="utf-8"))["grpo"], "train_seconds": round(train_s, 1),
        "steps": len(metrics), "diagnose_exit_code": diag_code, "healthy": diag_code == 0,
        "findings": [f["id"] for f in diagnosis.get("findings", [])],
        "reward_curve": [round(float(m["reward"]), 4) for m in metrics],
        "tool_failure_curve": [m.get("tools/failure_frequency") for m in metrics],
        "tool_calls_per_sample_curve": [m.get("tools/call_frequency") for m in metrics],
    }
    return {**out, **held_out}


def evaluate_run(run_dir: Path) -> dict[str, Any]:
    """`finetune eval`: held-out pass@1 after training on the baseline's prompts, and the paired interval."""
    eval_code = finetune("eval", str(run_dir), expect=(0, 1)).code
    evaluation = json.loads((run_dir / "eval.json").read_text(encoding="utf-8"))
    return {"held_out_pass_at_1_after": evaluation["trained"]["pass_at_1"],
            "held_out_pass_at_1_before": evaluation["base"]["pass_at_1"],
            "delta_pass_at_1": evaluation["delta_pass_at_1"], "delta_pass_at_1_ci95": evaluation["ci95"],
            "better_beyond_noise": eval_code == 0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-prompts", type=int, default=64)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--smoke", action="store_true", help="CPU, the tiny random model, 2 steps")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tool-task-bench"))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.eval_prompts, args.k = 2, 4, 2

    started = time.monotonic()
    work = args.work
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("runs", "records", "__pycache__"))
    model_id = None
    if args.smoke:
        from llm_finetuning.testing.tiny import build_tiny_model

        model_id = str(build_tiny_model(work / "tiny-model"))
    recipe = write_brief(work / "recipe.yaml", steps=args.steps, learning_rate=5e-7, deviation=None,
                         smoke=args.smoke, model_id=model_id)
    finetune("check", str(recipe))
    finetune("baseline", str(recipe), "--prompts", str(args.eval_prompts), "--k", str(args.k))
    base = json.loads((work / "records/baseline.json").read_text(encoding="utf-8"))
    (args.out / "tool-task-partial.json").unlink(missing_ok=True)  # this call's stages only
    save_partial(args.out, "baseline", {"pass_at_1": base["pass_at_1"], "pass_at_k": base["pass_at_k"],
                                        "mean_reward": base.get("mean_reward")})
    finetune("inspect", str(recipe), "--samples", "50")
    seal_for_tests(work / "records/inspection.json")
    inspected = episode_figures(work / "records/inspection.samples.jsonl")
    save_partial(args.out, "inspection", inspected)

    measured = work / "records/baseline.json"
    if args.smoke and base["pass_at_k"] == 0:
        shutil.copy(measured, work / "records/baseline.measured.json")
        synthetic_baseline(recipe)
    runs = {"recipe": train(recipe, work / "runs/recipe", evaluate=False)}
    if args.smoke and (work / "records/baseline.measured.json").is_file():
        shutil.copy(work / "records/baseline.measured.json", measured)  # eval pairs with what was measured
    if args.smoke:
        runs["recipe"].update(evaluate_run(work / "runs/recipe"))
    save_partial(args.out, "recipe", runs["recipe"])
    if not args.smoke:
        deviation = "runs/recipe" if runs["recipe"]["healthy"] else None
        brief = write_brief(work / "deviation.yaml", steps=args.steps, learning_rate=args.lr, deviation=deviation,
                            smoke=False, model_id=None)
        runs["deviation"] = train(brief, work / "runs/deviation", evaluate=True)
        save_partial(args.out, "deviation", runs["deviation"])

    import torch

    results = {
        "benchmark": "tool_task_gpu", "smoke": args.smoke, "example": "examples/calculator-tools",
        "model": model_id or "embedded:smollm2-135m-instruct", "generation": "transformers",
        "what_learned": ("nothing: a tiny random model, machinery only" if args.smoke else
                         "SmolLM2-135M-Instruct, calling multiply and answering with its result"),
        "machine": {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                    "torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count()},
        "eval_prompts": args.eval_prompts, "k": args.k,
        "held_out_pass_at_1_base": base["pass_at_1"], "held_out_pass_at_k_base": base["pass_at_k"],
        "inspection": {"reviewer": TEST_ONLY_REVIEWER, **inspected}, "runs": runs,
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = "tool-task-smoke.json" if args.smoke else "tool-task-h200.json"
    (args.out / name).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    for run in runs:  # the diagnosis, and what it read, so a later `finetune diagnose` can read it again
        for kept in ("diagnosis.json", "metrics.jsonl", "eval.json"):
            if (work / f"runs/{run}/{kept}").is_file():
                shutil.copy(work / f"runs/{run}/{kept}", args.out / f"tool-task-{run}-{kept}")
    print(json.dumps({k: v for k, v in results.items() if k != "runs"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
