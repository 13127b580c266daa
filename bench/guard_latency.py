"""How fast the PreToolUse guard answers, against starting `python3 -S -c pass` in the same run.

Claude Code runs the guard before every Bash, Write, Edit, MultiEdit and NotebookEdit call, so a call that
touches no record, review or launch must be answered in well under 100 ms. Each call runs the guard as
hooks/hooks.json does (`sh hooks/guard`, the hook input on stdin) in a fresh process, in a brief folder
with sealed records. Figures: the median wall time over 200 varied calls that touch none of them, the
same for calls that touch records (denied or let through after a look), and the ratio of each median to
the bare interpreter start measured in alternation with them. A call that touches nothing and is denied
anyway is counted and reported (a false positive).

    python bench/guard_latency.py [--calls 200] [--out bench/results/guard-latency.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _machine import cpu_model  # bench/ is the script folder, so on sys.path

REPO = Path(__file__).resolve().parents[1]
HOOK = REPO / "hooks" / "guard"
TARGET_MEDIAN_S = 0.1

PROGRAMS = ["ls -la", "git status", "git diff --stat", "pytest -q tests/unit", "npm run build", "cat src/app.py",
            "grep -rn TODO src", "python -c 'print(1)'", "make -j2", "docker ps", "wc -l data/train.jsonl",
            "head -n 5 data/train.jsonl", "pip list", "echo done", "mkdir -p out && cp a.txt out/",
            "rm -rf build dist", "sed -n 1,20p notes.md", "find . -name '*.py' | head", "tar czf out.tgz out",
            "curl -s localhost:8000/health"]
SUFFIXES = ["", " 2>&1 | tail -20", " && echo ok", " > /tmp/out.txt", "; true"]
FILE_CALLS = [("Write", {"file_path": "notes/plan.md", "content": "# plan\n"}),
              ("Edit", {"file_path": "src/app.py", "old_string": "a = 1", "new_string": "a = 2"}),
              ("MultiEdit", {"file_path": "README.md", "edits": [{"old_string": "x", "new_string": "y"}]})]
TOUCHING = [("Bash", {"command": "cat records/inspection.json"}),
            ("Bash", {"command": "echo x > records/inspection.json"}),
            ("Bash", {"command": "finetune review records/inspection.json"}),
            ("Write", {"file_path": "records/inspection.json", "content": "{}"}),
            ("Bash", {"command": "finetune gate brief.yaml"})]


def varied_calls(n: int) -> list[tuple[str, dict[str, Any]]]:
    """n calls an agent makes all day that touch no record, review or launch."""
    bash = [("Bash", {"command": p + s}) for p, s in itertools.product(PROGRAMS, SUFFIXES)]
    pool = bash + FILE_CALLS * 5
    return [pool[i % len(pool)] for i in range(n)]


def timed(cmd: list[str], stdin: str, cwd: Path, env: dict[str, str]) -> tuple[float, bool]:
    """Wall time of one call, and whether the guard denied it."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, cwd=cwd, env=env, check=True, timeout=120)
    return time.perf_counter() - start, '"deny"' in proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", type=Path, default=REPO / "bench/results/guard-latency.json")
    ns = parser.parse_args()
    sys.path.insert(0, str(REPO / "tests" / "gate"))
    from gate_fixtures import prepare_brief

    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    sh = shutil.which("sh") or "/bin/sh"
    python3 = shutil.which("python3", path=env["PATH"]) or sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        folder = prepare_brief(Path(tmp) / "b", "passing").parent
        quiet, touching, bare = [], [], []
        denied_quiet = 0
        for i, (tool, tool_input) in enumerate(varied_calls(ns.calls)):
            event = json.dumps({"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input,
                                "cwd": str(folder), "session_id": "bench", "tool_use_id": f"t{i}"})
            seconds, denied = timed([sh, str(HOOK)], event, folder, env)
            quiet.append(seconds)
            denied_quiet += denied  # these calls touch nothing: a deny here is a false positive
            bare.append(timed([python3, "-S", "-c", "pass"], "", folder, env)[0])
            tool, tool_input = TOUCHING[i % len(TOUCHING)]
            event = json.dumps({"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input,
                                "cwd": str(folder), "session_id": "bench", "tool_use_id": f"u{i}"})
            touching.append(timed([sh, str(HOOK)], event, folder, env)[0])
    result = {
        "benchmark": "guard_latency",
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "load_avg_1m": round(os.getloadavg()[0], 2)},
        "calls": ns.calls,
        "untouched_calls_denied": denied_quiet,
        "median_s": {"untouched": round(statistics.median(quiet), 4), "touching": round(statistics.median(touching), 4),
                     "python3_-S_-c_pass": round(statistics.median(bare), 4)},
        "p90_s": {"untouched": round(sorted(quiet)[int(0.9 * len(quiet))], 4),
                  "touching": round(sorted(touching)[int(0.9 * len(touching))], 4)},
        "ratio_to_bare_python": {"untouched": round(statistics.median(quiet) / statistics.median(bare), 2),
                                 "touching": round(statistics.median(touching) / statistics.median(bare), 2)},
        "target_median_s": TARGET_MEDIAN_S,
        "meets_target": statistics.median(quiet) < TARGET_MEDIAN_S,
    }
    print(f"guard, {ns.calls} calls that touch nothing: median {result['median_s']['untouched'] * 1000:.1f} ms "
          f"(p90 {result['p90_s']['untouched'] * 1000:.1f} ms), {result['ratio_to_bare_python']['untouched']}x a bare "
          f"`python3 -S -c pass` ({result['median_s']['python3_-S_-c_pass'] * 1000:.1f} ms); target < "
          f"{TARGET_MEDIAN_S * 1000:.0f} ms: {'met' if result['meets_target'] else 'NOT met'}")
    if denied_quiet:
        print(f"warning: the guard denied {denied_quiet} of the {ns.calls} calls that touch nothing")
    print(f"guard, calls that touch records or review: median {result['median_s']['touching'] * 1000:.1f} ms, "
          f"{result['ratio_to_bare_python']['touching']}x a bare start")
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
