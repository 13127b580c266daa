"""`finetune eval` on the demo's run, on this CPU: how long a before/after comparison takes.

Trains the demo's run (`finetune demo`: the embedded SmolLM2-135M-Instruct, examples/smollm2-json),
whose evaluation stage is `finetune eval RUN_DIR --prompts P --k 4`: the shipped baseline record holds
k 8, so the base model is sampled again beside the trained one (the named baseline of this benchmark).
Then `finetune eval RUN_DIR --prompts P --k 8` takes the base side from the record's per-prompt
successes and samples the trained model only. Figures: seconds, completions sampled, completions per
second, and the second's time as a ratio of the first's. Result: $OUT or bench/results/eval-cpu.json.

    python bench/eval_cpu.py --steps 16 --prompts 32
    python bench/eval_cpu.py --steps 16 --prompts 96 --label h200   # on a GPU machine: training stays on
                                                                    # the CPU (the demo's brief), eval uses the GPU
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from _cli import finetune  # noqa: E402  (bench/ is the script folder, so on sys.path)
from _machine import cpu_model  # noqa: E402


def gpu_name() -> str | None:
    """The first CUDA device's name, or None (asked in a child so this process stays free of torch)."""
    probe = "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
    name = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False).stdout.strip()
    return name or None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--work", type=Path, default=Path("/tmp/eval-bench"))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    parser.add_argument("--label", default="cpu", help="names the result file (eval-LABEL.json) and the machine")
    args = parser.parse_args()

    demo_run = finetune("demo", "--out", str(args.work), "--steps", str(args.steps), "--eval-prompts",
                        str(args.prompts), "--k", "4", "--json", capture=True)
    out, demo_s = demo_run.stdout, demo_run.seconds
    demo = json.loads(out.strip().splitlines()[-1])
    run = Path(demo["run_dir"])
    stage = next(s for s in demo["stages"] if "finetune eval" in s["name"])
    both = json.loads((run / "eval.json").read_text(encoding="utf-8"))
    again = finetune("eval", str(run), "--prompts", str(args.prompts), "--k", "8", expect=(0, 1), capture=True)
    code, record_s = again.code, again.seconds
    from_record = json.loads((run / "eval.json").read_text(encoding="utf-8"))

    def figures(result: dict[str, object], seconds: float, sides: int) -> dict[str, object]:
        sampled = sides * int(result["prompts"]) * int(result["k"])  # type: ignore[call-overload]
        return {"seconds": round(seconds, 1), "prompts": result["prompts"], "k": result["k"],
                "completions_sampled": sampled, "completions_per_second": round(sampled / seconds, 2),
                "base": result["base"], "trained": result["trained"], "delta_pass_at_1": result["delta_pass_at_1"],
                "ci95": result["ci95"], "beyond_noise": result["beyond_noise"],
                "base_source": result["baseline"]["base_source"]}  # type: ignore[index]

    results = {
        "benchmark": f"eval_{args.label}", "example": "examples/smollm2-json", "model": "embedded:smollm2-135m-instruct",
        "training_steps": args.steps, "prompts_asked": args.prompts,
        "machine": {"cpu": cpu_model(), "cpus": os.cpu_count(), "load_average": os.getloadavg()[0],
                    "python": platform.python_version(), "gpu": gpu_name()},
        "baseline_both_sides_sampled_k4": figures(both, stage["seconds"], 2),
        "base_from_record_k8": figures(from_record, record_s, 1),
        "ratio_seconds_record_k8_to_sampled_k4": round(record_s / stage["seconds"], 3),
        "eval_exit_code_k8": code, "demo_wall_minutes": round(demo_s / 60, 1),
        "note": ("eval uses only the prompts the baseline record sampled, so --prompts above that count is cut to "
                 "it; times are rough where other work shared the machine (load_average)"),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"eval-{args.label}.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
