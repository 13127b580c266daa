"""Throughput of the `unit_tests` sandbox against the naive way, measured in the same run.

Scores a batch of trivial solutions (each with three assert tests) through the `UnitTests` reward on the
pre-forked, isolated pool, and the same batch with one fresh `python -c` per completion (no isolation at
all, same number of concurrent workers). After one unmeasured warm-up batch through the pool, the two
alternate for --rounds rounds, so that a slow spell of a shared machine falls on both; prints completions
per second per round, the medians and their ratio, and writes bench/results/sandbox-throughput.json with
the machine described.

    python bench/sandbox_throughput.py [--n 512] [--rounds 5] [--tier namespaces|basic|auto] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _machine import cpu_model  # bench/ is the script folder, so on sys.path

from llm_finetuning.rewards.unit_tests import UnitTests
from llm_finetuning.sandbox import SandboxPool

TESTS = ["assert f(2) == 4", "assert f(3) == 9", "assert f(-1) == 1"]


def solutions(n: int) -> list[str]:
    return [f"```python\ndef f(x):\n    # completion {i}\n    return x * x\n```" for i in range(n)]


def _busy_cpu() -> float:
    """CPU seconds the whole machine spent busy (every field of /proc/stat's first line but idle and
    iowait): a job is reaped by the kernel, not by a process whose times would hold it, so per-process
    counters miss it. On an idle machine this is the cost of the method measured, and the same meter
    serves both."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def naive(batch: list[str], workers: int) -> tuple[float, list[float]]:
    """One fresh interpreter per completion: exit code 0 means every assert passed."""

    def one(code: str) -> float:
        body = code.split("```python\n", 1)[1].rsplit("```", 1)[0] + "\n" + "\n".join(TESTS)
        proc = subprocess.run([sys.executable, "-c", body], capture_output=True, timeout=30, check=False)
        return 1.0 if proc.returncode == 0 else 0.0

    t0, c0 = time.perf_counter(), _busy_cpu()
    with ThreadPoolExecutor(workers) as ex:
        scores = list(ex.map(one, batch))
    NAIVE_CPU[0] = _busy_cpu() - c0
    return time.perf_counter() - t0, scores


NAIVE_CPU = [0.0]
SANDBOX_CPU = [0.0]


def _reward(pool: SandboxPool) -> UnitTests:
    reward = UnitTests(timeout_s=10.0, memory_mb=512)
    reward.pool = pool
    return reward


def sandboxed(batch: list[str], pool: SandboxPool) -> tuple[float, list[float | None]]:
    reward = _reward(pool)
    t0, c0 = time.perf_counter(), _busy_cpu()
    scores = reward(prompts=[""] * len(batch), completions=batch, tests=[TESTS] * len(batch))
    SANDBOX_CPU[0] = _busy_cpu() - c0
    return time.perf_counter() - t0, scores


def machine() -> dict[str, object]:
    model = cpu_model()
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    return {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release(), "machine": platform.machine(),
            "python": platform.python_version(), "os": platform.platform(), "loadavg_at_start": load,
            "note": "a shared machine: other processes compete for the cores; see cpu_ms_per_completion"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tier", default="namespaces", choices=["namespaces", "basic", "auto"])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "sandbox-throughput.json")
    args = ap.parse_args()

    batch = solutions(args.n)
    pool = SandboxPool(isolation=args.tier)
    iso = pool.start()
    rounds: list[dict[str, float]] = []
    try:
        # One unmeasured batch first: training calls the pool thousands of times, and the first batch
        # after a start also pays for the kernel's and the zygote's first allocations (rounds show it).
        _reward(pool)(prompts=[""] * len(batch), completions=batch, tests=[TESTS] * len(batch))
        for r in range(args.rounds):
            t_sandbox, s_sandbox = sandboxed(batch, pool)
            t_naive, s_naive = naive(batch, pool.max_jobs)
            if not all(s == 1.0 for s in s_sandbox) or not all(s == 1.0 for s in s_naive):
                print("error: some trivial solution did not score 1", file=sys.stderr)
                return 1
            row = {"sandbox_completions_per_s": round(args.n / t_sandbox, 1),
                   "naive_completions_per_s": round(args.n / t_naive, 1),
                   "ratio": round(t_naive / t_sandbox, 2),
                   "sandbox_cpu_ms_per_completion": round(SANDBOX_CPU[0] / args.n * 1e3, 2),
                   "naive_cpu_ms_per_completion": round(NAIVE_CPU[0] / args.n * 1e3, 2)}
            rounds.append(row)
            print(f"round {r + 1}: sandbox {row['sandbox_completions_per_s']:.0f}/s, naive "
                  f"{row['naive_completions_per_s']:.0f}/s, ratio {row['ratio']:.1f}x", flush=True)
    finally:
        pool.close()
    cores = os.cpu_count() or 1

    def med(key: str) -> float:
        return statistics.median(row[key] for row in rounds)

    rate_sandbox, rate_naive = med("sandbox_completions_per_s"), med("naive_completions_per_s")
    cpu_ms_sandbox, cpu_ms_naive = med("sandbox_cpu_ms_per_completion"), med("naive_cpu_ms_per_completion")
    result = {
        "benchmark": "sandbox-throughput",
        "completions": args.n,
        "tests_per_completion": len(TESTS),
        "rounds": rounds,
        "sandbox": {"tier": iso.tier, "median_completions_per_s": rate_sandbox,
                    "concurrent_jobs": pool.max_jobs, "zygotes": pool.zygotes,
                    "median_cpu_ms_per_completion": cpu_ms_sandbox,
                    "projected_completions_per_s_all_cores_idle": round(cores * 1e3 / cpu_ms_sandbox),
                    "isolation": iso.facts},
        "naive_python_c": {"median_completions_per_s": rate_naive, "concurrent_workers": pool.max_jobs,
                           "isolation": "none", "median_cpu_ms_per_completion": cpu_ms_naive,
                           "projected_completions_per_s_all_cores_idle": round(cores * 1e3 / cpu_ms_naive)},
        "cpu_meter": "busy time of the whole machine (/proc/stat) during each batch",
        "ratio_of_medians": round(rate_sandbox / rate_naive, 2),
        "ratio_per_round": [row["ratio"] for row in rounds],
        "machine": machine(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"sandbox ({iso.tier}): median {rate_sandbox:.0f} completions/s over {args.rounds} rounds of {args.n}")
    print(f"naive python -c:      median {rate_naive:.0f} completions/s")
    per_round = ", ".join(f"{row['ratio']:.1f}x" for row in rounds)
    print(f"ratio of medians: {rate_sandbox / rate_naive:.1f}x (per round: {per_round})  -> {args.out}")
    print(f"CPU per completion: sandbox {cpu_ms_sandbox:.2f} ms, naive {cpu_ms_naive:.2f} ms; on {cores} idle cores "
          f"that is {cores * 1e3 / cpu_ms_sandbox:.0f} vs {cores * 1e3 / cpu_ms_naive:.0f} completions/s "
          f"(load average now {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
