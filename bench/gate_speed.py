"""How fast `finetune gate` answers, against `python -c "from trl import GRPOConfig"` in the same run.

The gate runs inside an agent's chat, so it must answer in well under a second; importing TRL (which
imports torch and transformers) is the baseline it is measured against. Each command runs in a fresh
process, as an agent would run it. Figures: the median wall time of each, and their ratio.

    python bench/gate_speed.py [--runs 7] [--trl-runs 3] [--out bench/results/gate-speed.json]

The gate is timed on a copy of examples/math-exact with a baseline and a sealed 64-sample inspection
record built through the records API (so every check does its full work and the gate passes), after one
warm-up run that fills the validation cache; the first run into an empty cache is reported as `cold`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from _machine import cpu_model  # bench/ is the script folder, so on sys.path
from _synthetic import seal_synthetic

REPO = Path(__file__).resolve().parents[1]
TARGET_MEDIAN_S = 0.3
TARGET_RATIO = 20.0


def timed(cmd: list[str], env: dict[str, str], expect: int | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + sys) of one run of `cmd` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if expect is not None and proc.returncode != expect:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def summary(runs: list[tuple[float, float]]) -> dict[str, Any]:
    return {"runs_s": [round(w, 4) for w, _ in runs], "median_s": round(statistics.median(w for w, _ in runs), 4),
            "median_cpu_s": round(statistics.median(c for _, c in runs), 4)}


def prepared_brief(folder: Path) -> Path:
    """examples/math-exact copied into `folder`, with a passing baseline and a sealed inspection record."""
    from llm_finetuning.brief import load_brief
    from llm_finetuning.models import model_identity
    from llm_finetuning.records import baseline, inspection

    shutil.copytree(REPO / "examples" / "math-exact", folder, dirs_exist_ok=True)
    brief, errors = load_brief(folder / "brief.yaml")
    assert brief is not None, errors
    rows = [json.loads(line) for line in (folder / "data" / "train.jsonl").read_text().splitlines()[:64]]
    samples = [{"prompt": r["prompt"], "completion": f"The answer is {r['answer']}.", "answer": r["answer"],
                "rewards": {"exact_match": 1.0}} for r in rows]
    record = brief.resolve(brief.records.inspection)
    identity = model_identity(brief.model, brief.folder)
    rec = inspection.create_inspection(brief, samples, record, identity)
    for s in rec["samples"]:
        inspection.set_verdict(rec, s["id"], "agree")
    inspection.save_progress(record, rec)
    seal_synthetic(record, "bench")
    baseline.write_baseline(brief.resolve(brief.records.baseline), baseline.make_baseline(
        brief, model_identity=identity, prompts={"source": "data/eval.jsonl", "count": 64}, k=8, pass_at_1=0.4,
        pass_at_k=0.9, mean_reward={"exact_match": 0.4}, frac_groups_all_tie=0.3, frac_truncated=0.0))
    return folder / "brief.yaml"


def machine() -> dict[str, Any]:
    model = cpu_model()
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": model,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "trl": metadata.version("trl"),
        "transformers": metadata.version("transformers"),
        "torch": metadata.version("torch"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--trl-runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "gate-speed.json")
    args = parser.parse_args()

    finetune = shutil.which("finetune", path=str(Path(sys.executable).parent)) or shutil.which("finetune")
    if finetune is None:
        raise SystemExit("the finetune CLI is not installed in this environment")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, LLM_FINETUNING_CACHE=str(Path(tmp) / "cache"))
        gate = [finetune, "gate", str(Path(tmp) / "math-exact" / "brief.yaml")]
        for _ in range(3):  # a reward module edited meanwhile (by a developer) makes fresh records stale
            prepared_brief(Path(tmp) / "math-exact")
            if subprocess.run(gate, capture_output=True, env=env).returncode == 0:
                break
        trl = [sys.executable, "-c", "from trl import GRPOConfig"]
        load_before = os.getloadavg()
        shutil.rmtree(env["LLM_FINETUNING_CACHE"], ignore_errors=True)
        cold, _ = timed(gate, env, expect=0)
        timed(gate, env, expect=0)
        # interleaved, so both commands see the same background load
        gate_runs: list[tuple[float, float]] = []
        trl_runs: list[tuple[float, float]] = []
        for i in range(max(args.runs, args.trl_runs)):
            if i < args.runs:
                gate_runs.append(timed(gate, env, expect=0))
            if i < args.trl_runs:
                trl_runs.append(timed(trl, env, expect=0))
        example = [timed([finetune, "gate", str(REPO / "examples" / "math-exact" / "brief.yaml")], env, expect=1)
                   for _ in range(3)]
        pass_runs = [timed([sys.executable, "-c", "pass"], env, expect=0) for _ in range(5)]
        load_after = os.getloadavg()
    g, t = summary(gate_runs), summary(trl_runs)
    ratio = t["median_s"] / g["median_s"]
    result = {
        "benchmark": "finetune gate vs `from trl import GRPOConfig`, a fresh process each, interleaved",
        "command": "python bench/gate_speed.py " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "load_average_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        "note": "wall time on a shared machine (see load_average); median_cpu_s (user + sys of the child "
                "process) is less sensitive to other processes",
        "gate_passing_brief": {**g, "cold_cache_s": round(cold, 4)},
        "gate_example_without_records": summary(example),
        "python_c_pass": summary(pass_runs),
        "trl_import": t,
        "ratio_trl_import_over_gate": round(ratio, 1),
        "ratio_cpu": round(t["median_cpu_s"] / g["median_cpu_s"], 1),
        "target": {"gate_median_under_s": TARGET_MEDIAN_S, "ratio_at_least": TARGET_RATIO},
        "meets_target": g["median_s"] < TARGET_MEDIAN_S and ratio >= TARGET_RATIO,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"finetune gate (passing brief): median {g['median_s']:.3f} s, cpu {g['median_cpu_s']:.3f} s "
          f"(cold cache {cold:.3f} s)")
    print(f"from trl import GRPOConfig:    median {t['median_s']:.3f} s, cpu {t['median_cpu_s']:.3f} s")
    print(f"ratio: {ratio:.1f}x wall, {result['ratio_cpu']}x cpu; python -c pass "
          f"{result['python_c_pass']['median_s']:.3f} s; load average {load_before[0]:.1f} -> {load_after[0]:.1f}")
    print(f"target (median < {TARGET_MEDIAN_S} s and >= {TARGET_RATIO:.0f}x): "
          f"{'met' if result['meets_target'] else 'NOT met'}; wrote {args.out}")

if __name__ == "__main__":
    main()
