"""Hard tool task: the gated pipeline against a hand-written TRL script, same task, steps, seed and evaluator.

examples/inventory-tools: four lookup tools (price, stock, weight, shelf) over a table the prompts never show;
the model must choose the tool the question asks about, name the item, and answer with the number returned. On one
CUDA GPU, the embedded SmolLM2-135M-Instruct with Qwen2.5's tool template, two processes side by side:

First, with `--demos auto`, each design of worked episodes in examples/make_data.py's INVENTORY_DEMOS is measured
(`finetune baseline`, side by side) and the one with the highest base pass@1 under 10% kept (the data the
example ships is written with it). Then:

- `pipeline`, as a user follows the gate's and diagnose's advice: `finetune check`, `baseline` (held-out
  prompts x k), `inspect` (50 episodes), a test-only seal (every verdict "agree", sealed as the reviewer
  "bench (test-only, no person read these)", the way bench/tool_task_gpu.py and the tests seal records: it stands
  in for `finetune review`, which a person runs), `gate`, the recipe run (learning rate 5e-7, --recipe-steps),
  `diagnose`; then the learning run at --lr with `grpo.deviation` naming the recipe run (only when diagnose
  called it healthy; the gate refuses it otherwise), gate, render, `launch`, `finetune eval`, diagnose;
- `script`: bench/handwritten_tool_grpo.py, GRPOTrainer with `tools=[...]`, the same data, a reward on the
  answer, the same G, batch, length, temperature, seed, constant learning rate and steps, started at once.

With `--seeds A,B,C` the recipe run is made once and then, for each seed, one learning run and one script run side
by side on the GPU; the result holds each seed's runs and the mean gain of each side.

Both trained models are scored by the same evaluator, `finetune eval` (the script's model through `--brief`), on
the baseline record's prompts and samples. Results: --out (default $OUT or bench/results)/inventory-tools-h200.json
(inventory-tools-smoke.json with --smoke), written stage by stage, and each run's diagnosis.

`--task addition` takes the same gated path (no script) on a single-turn task with a low base rate: examples/
math-exact's one-digit sums, "reply with only the number", for the embedded model at temperature 0.7, scored by
exact_match on a reply that is the number alone (the model restates the question first). Results: addition-h200.json.

    python bench/inventory_tools_gpu.py --steps 40 --lr 3e-5 --eval-prompts 64 --k 8 --seeds 3407,1234,2026
    python bench/inventory_tools_gpu.py --task addition --steps 40 --lr 3e-5 --eval-prompts 64 --k 8
    python bench/inventory_tools_gpu.py --smoke     # CPU, the tiny random model, 2 steps: the machinery only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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

from _cli import finetune, finetune_side_by_side  # noqa: E402
from tool_task_gpu import TEST_ONLY_REVIEWER, episode_figures, seal_for_tests, synthetic_baseline  # noqa: E402

EXAMPLES = {"inventory": REPO / "examples/inventory-tools", "addition": REPO / "examples/math-exact"}
RECIPE_LR = 5e-7
ADDITION_ANSWER = r"regex:^\s*(-?\d+)\s*\.?\s*$"


def result_name(task: str, smoke: bool) -> str:
    stem = "inventory-tools" if task == "inventory" else task
    return f"{stem}-smoke.json" if smoke else f"{stem}-h200.json"


def save(out: Path, name: str, key: str, value: Any) -> None:
    """One stage's figures into the result file as they come, so a call cut at its limit still reports."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    done = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    done[key] = value
    path.write_text(json.dumps(done, indent=2) + "\n", encoding="utf-8")


def write_brief(dst: Path, *, steps: int, learning_rate: float, deviation: str | None, smoke: bool,
                model_id: str | None, task: str = "inventory", seed: int | None = None) -> Path:
    data = yaml.safe_load((EXAMPLES[task] / "brief.yaml").read_text(encoding="utf-8"))
    data["model"]["id"] = model_id or "embedded:smollm2-135m-instruct"
    if task == "addition":  # the example is written for Qwen2.5-0.5B; the same settings as the tool task
        data["grpo"].update(temperature=0.7, logging_steps=1, gradient_checkpointing=False)
        # "Reply with only the number": the whole reply is the sum (the model restates the question first)
        data["rewards"][0]["args"] = {"answer_field": "answer", "extract": ADDITION_ANSWER, "math_verify": False}
    grpo = {"learning_rate": learning_rate, "deviation": deviation, "max_steps": steps, "save_steps": steps}
    if seed is not None:
        grpo["seed"] = seed
    if smoke:
        grpo.update(gradient_accumulation_steps=1, max_completion_length=16)
        data["model"]["dtype"] = "float32"
        data["hardware"] = {"gpus": 0, "generation": "transformers"}
    else:
        data["model"]["dtype"] = "bfloat16"
        data["hardware"] = {"gpus": 1, "gpu_memory_gib": 139, "generation": "transformers"}
    data["grpo"].update(grpo)
    data["output_dir"] = f"runs/{dst.stem}"
    dst.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return dst


def _make_data() -> Any:
    sys.path.insert(0, str(REPO / "examples"))
    import make_data

    return make_data


def demo_designs() -> list[str]:
    return list(_make_data().INVENTORY_DEMOS)


def write_demos(work: Path, design: str) -> None:
    """The example's data written with the worked episodes of `design` (examples/make_data.py, same seed)."""
    import random

    make_data = _make_data()
    tmp = work / "data-gen"
    make_data.HERE = tmp
    make_data.write_inventory(random.Random(39), design)
    for split in ("train", "eval"):
        shutil.copy(tmp / f"inventory-tools/data/{split}.jsonl", work / f"data/{split}.jsonl")


def measure_demos(work: Path, brief: Path, prompts: int, k: int) -> dict[str, dict[str, float]]:
    """Each design's base pass@1 and pass@k (`finetune baseline`), in its own copy of the example, side by side."""
    procs = {}
    for design in demo_designs():
        copy = work / "designs" / design
        shutil.copytree(work, copy, ignore=shutil.ignore_patterns("designs", "records", "runs", "data-gen"))
        write_demos(copy, design)
        procs[design] = subprocess.Popen([sys.executable, "-m", "llm_finetuning.cli", "baseline",
                                          str(copy / brief.name), "--prompts", str(prompts), "--k", str(k)])
    measured = {}
    for design, proc in procs.items():
        if proc.wait() == 0:
            base = json.loads((work / "designs" / design / "records/baseline.json").read_text(encoding="utf-8"))
            measured[design] = {"pass_at_1": base["pass_at_1"], "pass_at_k": base["pass_at_k"]}
    return measured


def choose_demos(measured: dict[str, dict[str, float]]) -> str:
    """The highest base pass@1 under 10% with some success (pass@k > 0); else the lowest pass@1 that has some."""
    fit = [d for d, m in measured.items() if m["pass_at_k"] > 0 and m["pass_at_1"] < 0.10]
    if fit:
        return max(fit, key=lambda d: measured[d]["pass_at_1"])
    some = [d for d, m in measured.items() if m["pass_at_k"] > 0] or list(measured)
    return min(some, key=lambda d: measured[d]["pass_at_1"])


def start_script(work: Path, model_dir: str, steps: int, lr: float, seed: int) -> tuple[subprocess.Popen[bytes], float]:
    log = open(work / f"script-{seed}.log", "wb")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen([sys.executable, str(REPO / "bench/handwritten_tool_grpo.py"), "--model", model_dir,
                             "--example", str(work), "--out", str(work / f"script-{seed}"), "--steps", str(steps),
                             "--learning-rate", str(lr), "--seed", str(seed)], stdout=log, stderr=subprocess.STDOUT)
    return proc, time.monotonic()


def finish_scripts(started: dict[int, tuple[subprocess.Popen[bytes], float]], work: Path,
                   brief: Path) -> dict[int, dict[str, Any]]:
    """Wait for the hand-written scripts; each one's figures, and its model scored by `finetune eval --brief`
    (the models side by side)."""
    results: dict[int, dict[str, Any]] = {}
    for seed, (proc, t0) in started.items():
        code = proc.wait()
        result: dict[str, Any] = {"exit": code, "wall_seconds": round(time.monotonic() - t0, 1)}
        if code:
            result["log_tail"] = (work / f"script-{seed}.log").read_text(errors="replace")[-3000:]
        else:
            result.update(json.loads((work / f"script-{seed}/script.json").read_text(encoding="utf-8")))
            result.pop("grpo_config", None)
        results[seed] = result
    trained = [seed for seed, r in results.items() if r["exit"] == 0]
    for seed, scored in zip(trained, held_out_side_by_side([work / f"script-{seed}/model" for seed in trained],
                                                           brief), strict=True):
        results[seed]["held_out"] = scored
    return results


def metrics_of(run_dir: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    return [m for m in rows if "reward" in m]


def run(brief: Path, run_dir: Path) -> dict[str, Any]:
    """gate (exit 0 or the bench stops), render, launch; what it trained, in seconds and curves."""
    return runs_side_by_side({brief: run_dir})[brief]


def runs_side_by_side(briefs: dict[Path, Path]) -> dict[Path, dict[str, Any]]:
    """Each brief gated and rendered into its run folder, then the runs the gate passed launched at once on the
    one GPU; what each trained, in seconds and curves."""
    results: dict[Path, dict[str, Any]] = {}
    passed: dict[Path, Path] = {}
    for brief, run_dir in briefs.items():
        gate = finetune("gate", str(brief), expect=(0, 1), capture=True)
        print(gate.stdout, flush=True)
        if gate.code != 0:
            results[brief] = {"gate_exit_code": gate.code, "gate": gate.stdout}
            continue
        finetune("render", str(brief), "-o", str(run_dir))
        passed[brief] = run_dir
        results[brief] = {"gate_exit_code": 0, "gate_recipe_values": [line for line in gate.stdout.splitlines()
                                                                      if "recipe_values" in line]}
    launched = finetune_side_by_side(*[("launch", str(run_dir)) for run_dir in passed.values()]) if passed else []
    for (brief, run_dir), ran in zip(passed.items(), launched, strict=True):
        metrics = metrics_of(run_dir)
        results[brief].update({
            "launch_seconds": round(ran.seconds, 1), "steps": len(metrics),
            "reward_curve": [round(float(m["reward"]), 4) for m in metrics],
            "tool_failure_curve": [m.get("tools/failure_frequency") for m in metrics],
            "mean_length_curve": [m.get("completions/mean_length") for m in metrics]})
    return results


def diagnosis(run_dir: Path) -> dict[str, Any]:
    code = finetune("diagnose", str(run_dir), expect=(0, 1), capture=True)
    print(code.stdout, flush=True)
    record = json.loads((run_dir / "diagnosis.json").read_text(encoding="utf-8"))
    return {"diagnose_exit_code": code.code, "healthy": record["healthy"], "task": record.get("task", []),
            "findings": [{"id": f["id"], "kind": f.get("kind"), "severity": f["severity"],
                          "message": f["evidence"].get("message")} for f in record["findings"]]}


def held_out(target: Path, brief: Path | None) -> dict[str, Any]:
    """`finetune eval` on the baseline's prompts: pass@1 before and after with the paired 95% interval."""
    return held_out_side_by_side([target], brief)[0]


def held_out_side_by_side(targets: list[Path], brief: Path | None) -> list[dict[str, Any]]:
    """`held_out` for several trained models at once (the same prompts and samples each)."""
    if not targets:
        return []
    extra = ["--brief", str(brief)] if brief else []
    scored = []
    for ran in finetune_side_by_side(*[("eval", str(t), "--json", *extra) for t in targets], expect=(0, 1),
                                     capture=True):
        e = json.loads(ran.stdout)
        scored.append({"pass_at_1_base": e["base"]["pass_at_1"], "pass_at_1_trained": e["trained"]["pass_at_1"],
                       "pass_at_k_base": e["base"]["pass_at_k"], "pass_at_k_trained": e["trained"]["pass_at_k"],
                       "delta_pass_at_1": e["delta_pass_at_1"], "ci95": e["ci95"],
                       "better_beyond_noise": ran.code == 0, "eval_seconds": round(ran.seconds, 1)})
    return scored


def gain_points(results: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Held-out pass@1 gained, in points, per seed and on average over the seeds that were scored."""
    per_seed = {str(seed): round(100 * r["held_out"]["delta_pass_at_1"], 1)
                for seed, r in results.items() if "held_out" in r}
    return {"per_seed": per_seed, "mean": round(sum(per_seed.values()) / len(per_seed), 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--recipe-steps", type=int, default=10)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--eval-prompts", type=int, default=64)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--seeds", default="3407", help="comma-separated: one learning run (and, on the tool "
                        "task, one hand-written script) per seed, side by side on the GPU; the recipe run once")
    parser.add_argument("--task", choices=sorted(EXAMPLES), default="inventory")
    parser.add_argument("--demos", default="auto", help="inventory: a design of examples/make_data.py's "
                        "INVENTORY_DEMOS, or auto (measure each, keep the highest base pass@1 under 10%%)")
    parser.add_argument("--smoke", action="store_true", help="CPU, the tiny random model, 2 steps")
    parser.add_argument("--work", type=Path, default=Path("/tmp/inventory-tools-bench"))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.recipe_steps, args.eval_prompts, args.k = 2, 2, 4, 2
        args.demos = "shelf3" if args.demos == "auto" else args.demos
    name = result_name(args.task, args.smoke)
    seeds = [int(s) for s in args.seeds.split(",")]
    example, tools = EXAMPLES[args.task], args.task == "inventory"
    (args.out / name).unlink(missing_ok=True)
    started = time.monotonic()
    work = args.work
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(example, work, ignore=shutil.ignore_patterns("runs", "records", "__pycache__"))

    import torch

    from llm_finetuning.models import ModelName, resolve_model

    save(args.out, name, "machine", {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                                     "torch": torch.__version__, "python": platform.python_version(),
                                     "cpus": os.cpu_count()})
    model_id = None
    if args.smoke:
        from llm_finetuning.testing.tiny import build_tiny_model

        model_id = str(build_tiny_model(work / "tiny-model"))
        model_dir = model_id
    else:
        model_dir = str(resolve_model(ModelName("embedded:smollm2-135m-instruct")).path)
    save(args.out, name, "settings", {
        "task": f"examples/{example.name}", "model": model_id or "embedded:smollm2-135m-instruct",
        "steps": args.steps, "recipe_steps": args.recipe_steps, "learning_rate": args.lr, "schedule": "constant",
        "batch": "G=8, 8 x 4" if not args.smoke else "G=8, 8 x 1", "max_completion_length": 16 if args.smoke else 96,
        "temperature": 0.7, "seeds": seeds, "recipe_seed": 3407, "max_turns": 2 if tools else None,
        "held_out": f"{args.eval_prompts} x {args.k}",
        "rewards": ("pipeline: exact_match 1.0 + tool_call 0.25; script: the answer's last number only" if tools
                    else f"exact_match, extract {ADDITION_ANSWER}"),
        "review": f"test-only seal as {TEST_ONLY_REVIEWER!r}: no person read the 50 episodes"})
    recipe = write_brief(work / "recipe.yaml", steps=args.recipe_steps, learning_rate=RECIPE_LR, deviation=None,
                         smoke=args.smoke, model_id=model_id, task=args.task)
    finetune("check", str(recipe))
    if tools and args.demos == "auto":
        designs = measure_demos(work, recipe, args.eval_prompts, args.k)
        chosen = choose_demos(designs)
        save(args.out, name, "demo_designs", {"measured": designs, "chosen": chosen,
                                              "rule": "the highest base pass@1 under 10% with pass@k above 0"})
        write_demos(work, chosen)
    elif tools:
        save(args.out, name, "demo_designs", {"chosen": args.demos, "measured": None})  # named, not measured here
        write_demos(work, args.demos)
    scripts = {seed: start_script(work, model_dir, args.steps, args.lr, seed) for seed in seeds} if tools else {}
    finetune("baseline", str(recipe), "--prompts", str(args.eval_prompts), "--k", str(args.k))
    base = json.loads((work / "records/baseline.json").read_text(encoding="utf-8"))
    save(args.out, name, "baseline", {"pass_at_1": base["pass_at_1"], "pass_at_k": base["pass_at_k"],
                                      "mean_reward": base.get("mean_reward"), "k": base["k"]})
    finetune("inspect", str(recipe), "--samples", "50")
    seal_for_tests(work / "records/inspection.json")
    save(args.out, name, "inspection", {"reviewer": TEST_ONLY_REVIEWER,
                                        **episode_figures(work / "records/inspection.samples.jsonl")})
    measured = work / "records/baseline.json"
    if args.smoke and base["pass_at_k"] == 0:  # a random model never succeeds: a labelled stand-in for the gate
        shutil.copy(measured, work / "records/baseline.measured.json")
        synthetic_baseline(recipe)

    recipe_run = run(recipe, work / "runs/recipe")
    if recipe_run["gate_exit_code"] == 0:
        recipe_run.update(diagnosis(work / "runs/recipe"))
    save(args.out, name, "recipe", recipe_run)
    deviation = "runs/recipe" if recipe_run.get("healthy") else None
    learning = {seed: write_brief(work / f"learning-{seed}.yaml", steps=args.steps, learning_rate=args.lr,
                                  deviation=deviation, smoke=args.smoke, model_id=model_id, task=args.task,
                                  seed=seed) for seed in seeds}
    launched = runs_side_by_side({brief: work / f"runs/{brief.stem}" for brief in learning.values()})
    pipeline = {seed: launched[brief] for seed, brief in learning.items()}
    if args.smoke and (work / "records/baseline.measured.json").is_file():
        shutil.copy(work / "records/baseline.measured.json", measured)  # eval pairs with what was measured
    trained = [seed for seed, r in pipeline.items() if r["gate_exit_code"] == 0]
    for seed, scored in zip(trained, held_out_side_by_side([work / f"runs/learning-{seed}" for seed in trained],
                                                           None), strict=True):
        pipeline[seed]["held_out"] = scored
        pipeline[seed].update(diagnosis(work / f"runs/learning-{seed}"))
    save(args.out, name, "pipeline", {str(seed): r for seed, r in pipeline.items()})

    script_results = finish_scripts(scripts, work, learning[seeds[0]])
    if scripts:
        save(args.out, name, "script", {str(seed): r for seed, r in script_results.items()})
    gains = {who: gain_points(results) for who, results in (("pipeline", pipeline), ("script", script_results))
             if any("held_out" in r for r in results.values())}
    save(args.out, name, "gain_points", gains)
    save(args.out, name, "wall_seconds", round(time.monotonic() - started, 1))
    for run_name in ["recipe", *(f"learning-{seed}" for seed in seeds)]:  # what diagnose read, to diagnose again
        for file in ("diagnosis.json", "metrics.jsonl", "eval.json"):
            if (work / f"runs/{run_name}/{file}").is_file():
                shutil.copy(work / f"runs/{run_name}/{file}", args.out / f"{args.task}-{run_name}-{file}")
    print(json.dumps(gains))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
