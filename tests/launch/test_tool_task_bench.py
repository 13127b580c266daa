"""`bench/tool_task_gpu.py --smoke`: the tool-use pipeline chains on CPU with the tiny random model
(check, baseline, inspect with a test-only seal, gate, render, launch, diagnose, eval)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_smoke_mode_runs_the_whole_tool_pipeline(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench/tool_task_gpu.py"), "--smoke", "--work",
                           str(tmp_path / "work"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "out/tool-task-smoke.json").read_text())
    assert result["smoke"] is True and result["what_learned"].startswith("nothing")
    assert result["inspection"]["episodes"] == 50
    assert result["inspection"]["reviewer"] == "bench (test-only, no person read these)"
    run = result["runs"]["recipe"]
    assert run["steps"] == 2 and len(run["tool_failure_curve"]) == 2  # TRL logged its tool metrics
    assert {"held_out_pass_at_1_after", "delta_pass_at_1_ci95"} <= set(run)
    assert (tmp_path / "out/tool-task-recipe-diagnosis.json").is_file()
