"""What running a custom reward in the confined child costs per reward batch (docs/sandbox.md).

The same reward (each completion's length, a stand-in for cheap reward code) is called on batches of 16, 64 and
256 completions of 300 characters: in-process (the function imported here: the baseline) and through the
confined child (`rewards.build.CustomReward`, as training calls it). Prints the median milliseconds per batch of
each, the added milliseconds and the ratio, and the child's start-up once; writes
bench/results/project-code-overhead.json.

    python bench/project_code_overhead.py
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "project-code-overhead.json"
REWARD = "def length(prompts, completions, **kwargs):\n    return [float(len(c)) for c in completions]\n"
ROUNDS = 50


def median_ms(call: object, prompts: list[str], completions: list[str]) -> float:
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        call(prompts=prompts, completions=completions)  # type: ignore[operator]
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> int:
    from llm_finetuning.rewards.build import CustomReward
    from llm_finetuning.sandbox.project_code import shared_child

    with tempfile.TemporaryDirectory(prefix="overhead-") as tmp:
        (Path(tmp) / "overhead_reward.py").write_text(REWARD)
        sys.path.insert(0, tmp)
        plain = importlib.import_module("overhead_reward").length
        started = time.perf_counter()
        confined = CustomReward("overhead_reward:length", Path(tmp), {}, "overhead_reward:length")
        startup_ms = (time.perf_counter() - started) * 1000
        report: dict[str, object] = {"child_start_and_load_ms": round(startup_ms, 1), "rounds": ROUNDS, "batches": []}
        for n in (16, 64, 256):
            prompts, completions = ["p"] * n, ["x" * 300] * n
            assert confined(prompts, completions) == plain(prompts=prompts, completions=completions)
            base, through = median_ms(plain, prompts, completions), median_ms(confined, prompts, completions)
            row = {"completions": n, "in_process_ms": round(base, 4), "confined_ms": round(through, 4),
                   "added_ms": round(through - base, 4), "ratio": round(through / base, 1)}
            report["batches"].append(row)  # type: ignore[union-attr]
            print(f"{n:4d} completions: in-process {base:.4f} ms, confined {through:.4f} ms "
                  f"(+{through - base:.3f} ms, {through / base:.0f}x)")
        print(f"child start-up and first load: {startup_ms:.0f} ms")
        shared_child().close()
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
