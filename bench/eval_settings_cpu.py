"""Before/after at the training temperature and at evaluation settings, on the demo's run, on this CPU.

Trains the demo's run (`finetune demo`: the embedded SmolLM2-135M-Instruct, examples/smollm2-json,
trained at its grpo.temperature 0.7), then, for each setting, measures the base model with
`finetune baseline BRIEF --prompts P [--temperature T | --greedy]` and compares the trained model with
`finetune eval RUN_DIR --prompts P [--temperature T | --greedy]` (its base side from that record).
The named baseline is the training temperature: every other setting's gain is printed as a ratio of
the gain measured there in the same run. Result: $OUT or bench/results/eval-settings-cpu.json.

    python bench/eval_settings_cpu.py --steps 16 --prompts 32
    python bench/eval_settings_cpu.py --work /tmp/eval-bench   # reuse a demo run already there
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from _cli import finetune  # noqa: E402  (bench/ is the script folder, so on sys.path)
from _machine import cpu_model  # noqa: E402

# (name, options of `finetune baseline` and `finetune eval`); the first is the named baseline.
SETTINGS = [("training temperature (grpo.temperature 0.7)", []), ("temperature 1.0", ["--temperature", "1.0"]),
            ("greedy", ["--greedy"])]


def measure(brief: Path, run: Path, prompts: int, options: list[str]) -> dict[str, object]:
    """The base model's record at this setting, then the trained model against it."""
    base = finetune("baseline", str(brief), "--prompts", str(prompts), *options, "--json", capture=True)
    out, base_s = base.stdout, base.seconds
    record = json.loads(out)
    evaluated = finetune("eval", str(run), "--prompts", str(prompts), *options, "--json", expect=(0, 1), capture=True)
    code, out, eval_s = evaluated.code, evaluated.stdout, evaluated.seconds
    result = json.loads(out)
    written = json.loads((run / "eval.json").read_text(encoding="utf-8"))
    return {"record": Path(record["path"]).name, "k": result["k"], "temperature": result["temperature"],
            "greedy": result["greedy"], "base": result["base"], "trained": result["trained"],
            "delta_pass_at_1": result["delta_pass_at_1"], "ci95": result["ci95"],
            "beyond_noise": result["beyond_noise"], "eval_exit_code": code,
            "base_source": written["baseline"]["base_source"], "baseline_seconds": round(base_s, 1),
            "eval_seconds": round(eval_s, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--work", type=Path, default=Path("/tmp/eval-settings-bench"))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    args = parser.parse_args()

    run = args.work / "runs" / "demo"
    demo_s = 0.0
    if not (run / "model").is_dir():
        demo_s = finetune("demo", "--out", str(args.work), "--steps", str(args.steps), "--eval-prompts",
                          str(args.prompts), "--k", "4", "--json", capture=True).seconds
    brief = args.work / "brief.yaml"
    rows = {name: measure(brief, run, args.prompts, options) for name, options in SETTINGS}
    named = SETTINGS[0][0]
    reference = float(rows[named]["delta_pass_at_1"])  # type: ignore[arg-type]
    for row in rows.values():
        row["gain_ratio_to_training_temperature"] = (
            round(float(row["delta_pass_at_1"]) / reference, 2) if reference else None)  # type: ignore[arg-type]
    results = {
        "benchmark": "eval_settings_cpu", "example": "examples/smollm2-json", "model": "embedded:smollm2-135m-instruct",
        "training_steps": args.steps, "prompts": args.prompts, "named_baseline": named, "settings": rows,
        "machine": {"cpu": cpu_model(), "cpus": os.cpu_count(), "load_average": os.getloadavg()[0],
                    "python": platform.python_version()},
        "demo_wall_minutes": round(demo_s / 60, 1),
        "note": "held-out eval split; k = grpo.num_generations (8) when sampling, 1 when greedy; shared 2-core "
                "machine: treat times as rough",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "eval-settings-cpu.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
