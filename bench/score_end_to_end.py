"""`finetune score` end to end against the sandbox pool's steady state, measured in the same run.

Where the time of `finetune score BRIEF --completions FILE` goes, on the `unit_tests` reward with the
same trivial solutions as bench/sandbox_throughput.py (three asserts each):

- cli:        the real CLI in a fresh process on N rows (start-up, brief, rows, pool start, scoring, exit);
- cli_1_row:  the same CLI on one row: the fixed cost a run pays whatever N is;
- score_rows: `score_rows` in this process on a warm pool (the CLI's scoring loop: row checks, chunks);
- steady:     one `UnitTests` call on the whole batch on the warm pool (the pool's steady state, the
              baseline of bench/sandbox_throughput.py).

The four alternate for --rounds rounds so a slow spell of the shared machine falls on all of them;
prints completions per second per round, the medians and their ratios to the steady state, and writes
bench/results/score-end-to-end.json.

    python bench/score_end_to_end.py [--n 2048] [--rounds 3] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sandbox_throughput import TESTS, machine, solutions  # bench/ is the script folder, so on sys.path

from llm_finetuning.brief import load_brief
from llm_finetuning.rewards.build import build_reward_funcs, score_rows
from llm_finetuning.rewards.unit_tests import UnitTests
from llm_finetuning.sandbox import get_pool

REPO = Path(__file__).resolve().parents[1]


def write_case(folder: Path, n: int) -> tuple[Path, Path, Path]:
    """The code-tests example with N rows of completions to score, and a one-row file."""
    shutil.copytree(REPO / "examples" / "code-tests", folder / "code-tests")
    brief = folder / "code-tests" / "brief.yaml"
    rows = [{"prompt": "p", "completion": c, "tests": TESTS} for c in solutions(n)]
    many, one = folder / "rows.jsonl", folder / "one.jsonl"
    many.write_text("".join(json.dumps(r) + "\n" for r in rows))
    one.write_text(json.dumps(rows[0]) + "\n")
    return brief, many, one


def cli_seconds(brief: Path, rows: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "llm_finetuning.cli", "score", str(brief), "--completions", str(rows),
                           "--json"], env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0 or '"total": 0' in proc.stdout:
        raise SystemExit(f"finetune score failed or scored a trivial solution 0: {proc.stderr[-500:]}")
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "score-end-to-end.json")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="score-bench-"))
    try:
        brief_path, many, one = write_case(work, args.n)
        brief, errors = load_brief(brief_path)
        assert brief is not None, errors
        rows = [json.loads(line) for line in many.read_text().splitlines()]
        funcs = build_reward_funcs(brief, None)
        steady_reward = UnitTests(timeout_s=5.0, memory_mb=256)
        pool = get_pool()
        cli_seconds(brief_path, one)  # unmeasured: the first start pays for cold caches
        steady_reward(prompts=["p"] * args.n, completions=[r["completion"] for r in rows], tests=[TESTS] * args.n)
        rounds = []
        for r in range(args.rounds):
            t_cli = cli_seconds(brief_path, many)
            t_one = cli_seconds(brief_path, one)
            t0 = time.perf_counter()
            score_rows(brief, rows, funcs=funcs)
            t_rows = time.perf_counter() - t0
            t0 = time.perf_counter()
            scores = steady_reward(prompts=["p"] * args.n, completions=[r["completion"] for r in rows],
                                   tests=[TESTS] * args.n)
            t_steady = time.perf_counter() - t0
            assert all(s == 1.0 for s in scores)
            row = {"cli_completions_per_s": round(args.n / t_cli, 1), "cli_1_row_s": round(t_one, 3),
                   "score_rows_completions_per_s": round(args.n / t_rows, 1),
                   "steady_completions_per_s": round(args.n / t_steady, 1)}
            rounds.append(row)
            print(f"round {r + 1}: cli {row['cli_completions_per_s']:.0f}/s (1 row: {t_one:.2f} s), "
                  f"score_rows {row['score_rows_completions_per_s']:.0f}/s, steady {row['steady_completions_per_s']:.0f}/s",
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def med(key: str) -> float:
        return statistics.median(row[key] for row in rounds)

    cli, fixed, by_rows, steady = (med("cli_completions_per_s"), med("cli_1_row_s"),
                                   med("score_rows_completions_per_s"), med("steady_completions_per_s"))
    result = {
        "benchmark": "score-end-to-end",
        "completions": args.n,
        "tests_per_completion": len(TESTS),
        "rounds": rounds,
        "median": {"cli_completions_per_s": cli, "cli_1_row_s": fixed, "score_rows_completions_per_s": by_rows,
                   "steady_completions_per_s": steady},
        "ratio_to_steady": {"cli": round(cli / steady, 2), "score_rows": round(by_rows / steady, 2)},
        "cli_without_fixed_cost_completions_per_s": round(args.n / max(1e-9, args.n / cli - fixed), 1),
        "pool": {"concurrent_jobs": pool.max_jobs, "zygotes": pool.zygotes},
        "machine": machine(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"finetune score, end to end:  median {cli:.0f} completions/s ({cli / steady:.2f}x the steady state)")
    print(f"  of which fixed cost:        {fixed:.2f} s a run (start-up, brief, pool start, exit)")
    print(f"score_rows on a warm pool:    median {by_rows:.0f} completions/s ({by_rows / steady:.2f}x)")
    print(f"pool steady state:            median {steady:.0f} completions/s  -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
