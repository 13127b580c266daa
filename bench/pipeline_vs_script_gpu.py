"""GPU benchmark: the gated pipeline against a hand-written TRL script, same task, steps and seed.

On one CUDA GPU, the embedded SmolLM2-135M-Instruct learns examples/smollm2-json's task twice, at the
justified deviation learning rate 3e-5 (the example's own `deviation: evidence/recipe-h200`), constant schedule,
G=8, batch 8 x 4, 128-token completions, temperature 0.7, seed 3407, 40 steps:

- `pipeline`: gate -> render -> `finetune launch` -> diagnose, as a user runs it (today's render: a static KV
  cache with decoding compiled into CUDA graphs);
- `script`: bench/handwritten_grpo.py, a plain TRL GRPOTrainer script with the same settings and TRL's
  defaults for the rest (its generation: TRL's transformers path with `cache_implementation: static`, decoded
  uncompiled, as a user may set it; generation does not change what is learnt, only how fast).

Both, and the base model, are scored on the same 96 held-out prompts x 4 samples at temperatures 0.7 and 1.0
(pass@1 with a 95% interval over prompts), the protocol of bench/schedule_gpu.py, so `pipeline` is also
comparable with that benchmark's json / 3e-5 / constant run (the same configuration and seed, before decoding
was compiled): bench/results/schedule-h200.json. Results: $OUT/pipeline-vs-script-h200.json.

    python bench/pipeline_vs_script_gpu.py
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

import schedule_gpu  # noqa: E402
from _cli import finetune  # noqa: E402
from launch_gpu import GpuMemoryPoller  # noqa: E402
from schedule_gpu import EVAL_TEMPERATURES, pass_at_1, train, write_brief  # noqa: E402

TASK = "json"
STEPS = 40
LEARNING_RATE = 3e-5
RESULT = "pipeline-vs-script-h200.json"


def save(out: Path, key: str, value: Any) -> None:
    """Every result into $OUT/RESULT as it comes, so a call cut at its limit still reports."""
    schedule_gpu.save(out, key, value, RESULT)


def prepare(work: Path, baseline_prompts: int) -> None:
    """The example with its records and evidence; the GPU baseline record (finetune baseline)."""
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(REPO / "examples/smollm2-json", work / TASK, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    brief = write_brief(TASK, work, "base", STEPS, LEARNING_RATE, "constant", "evidence/recipe-h200")
    finetune("baseline", str(brief), "--prompts", str(baseline_prompts), "--k", "8")


def run_script(work: Path, model_dir: str, out: Path) -> dict[str, Any]:
    target = work / TASK / "runs" / "script"
    t0 = time.monotonic()
    log = work / "script.log"
    with open(log, "w") as fh:
        code = subprocess.run([sys.executable, str(REPO / "bench/handwritten_grpo.py"), "--model", model_dir,
                               "--example", str(work / TASK), "--out", str(target), "--steps", str(STEPS),
                               "--learning-rate", str(LEARNING_RATE), "--cache-implementation", "static"],
                              stdout=fh, stderr=subprocess.STDOUT, check=False).returncode
    result: dict[str, Any] = {"exit": code, "train_seconds": round(time.monotonic() - t0, 1)}
    if code:
        result["log_tail"] = log.read_text(errors="replace")[-3000:]
    else:
        result.update(json.loads((target / "script.json").read_text()))
    save(out, "script", result)
    return result


def evaluate(work: Path, out: Path, n_prompts: int, k: int) -> dict[str, Any]:
    """base, pipeline and script at each temperature, one process per job (model loading is per process)."""
    jobs = [(name, model, t) for name, model in (("base", None), ("pipeline", work / TASK / "runs/pipeline/model"),
                                                   ("script", work / TASK / "runs/script/model"))
            for t in EVAL_TEMPERATURES if model is None or model.is_dir()]
    procs = [subprocess.Popen([sys.executable, __file__, "--eval-one", name, str(model or ""), str(t),
                               "--work", str(work), "--eval-prompts", str(n_prompts), "--k", str(k)])
             for name, model, t in jobs]
    codes = [p.wait() for p in procs]
    table: dict[str, Any] = {}
    for name, _model, t in jobs:
        path = work / f"eval-{name}-{t:g}.json"
        if path.is_file():
            table.setdefault(name, {})[f"T={t:g}"] = json.loads(path.read_text())
    save(out, "held_out", {"exit_codes": codes, "table": table})
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval-prompts", type=int, default=96)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--baseline-prompts", type=int, default=48)
    parser.add_argument("--work", type=Path, default=Path("/tmp/pipeline-vs-script"))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    parser.add_argument("--eval-one", nargs=3, metavar=("NAME", "MODEL", "T"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.eval_one:
        name, model, temperature = args.eval_one
        result = pass_at_1(args.work / TASK / "base.yaml", Path(model) if model else None, float(temperature),
                           args.eval_prompts, args.k)
        (args.work / f"eval-{name}-{float(temperature):g}.json").write_text(json.dumps(result))
        return

    import torch

    from llm_finetuning.models import ModelName, resolve_model

    started = time.monotonic()
    save(args.out, "machine", {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                               "torch": torch.__version__, "python": platform.python_version(),
                               "cpus": os.cpu_count()})
    save(args.out, "settings", {"task": "examples/smollm2-json", "steps": STEPS, "learning_rate": LEARNING_RATE,
                                "schedule": "constant", "batch": "G=8, 8 x 4", "max_completion_length": 128,
                                "temperature": 0.7, "seed": 3407, "held_out": f"{args.eval_prompts} x {args.k}"})
    prepare(args.work, args.baseline_prompts)
    model_dir = resolve_model(ModelName("embedded:smollm2-135m-instruct")).path
    with GpuMemoryPoller() as mem, ThreadPoolExecutor(max_workers=2) as pool:
        pipeline = pool.submit(train, TASK, args.work, "pipeline", LEARNING_RATE, "constant", "evidence/recipe-h200",
                               STEPS, args.out)
        script = pool.submit(run_script, args.work, model_dir, args.out)
        runs = {"pipeline": pipeline.result(), "script": script.result()}
    save(args.out, "pipeline", runs["pipeline"])
    save(args.out, "training_peak_gpu_memory_used_mib", max(mem.peak.values(), default=0))
    table = evaluate(args.work, args.out, args.eval_prompts, args.k)
    gains = {}
    for name in ("pipeline", "script"):
        for t in EVAL_TEMPERATURES:
            key = f"T={t:g}"
            if name in table and key in table[name] and key in table.get("base", {}):
                gains[f"{name} {key}"] = round((table[name][key]["pass_at_1"] - table["base"][key]["pass_at_1"]) * 100,
                                               1)
    save(args.out, "gain_points", gains)
    save(args.out, "wall_seconds", round(time.monotonic() - started, 1))
    print(json.dumps({"gain_points": gains, "table": table}, indent=1))


if __name__ == "__main__":
    main()
