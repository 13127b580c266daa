"""`bench/inventory_tools_gpu.py --smoke`: the hard tool task's benchmark chains on CPU with the tiny random model
(check, baseline, inspect with a test-only seal, gate, the recipe run, diagnose; the hand-written TRL script beside
it, scored by `finetune eval --brief`), two seeds side by side. A random model never succeeds, so its recipe run has
no signal at all (the run's finding) and the gate refuses the learning runs: the refusal is part of what the smoke
run shows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_smoke_mode_runs_the_gated_path_and_the_script(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench/inventory_tools_gpu.py"), "--smoke", "--seeds", "3407,11",
                           "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "out/inventory-tools-smoke.json").read_text())
    assert result["inspection"]["episodes"] == 50
    recipe = result["recipe"]
    assert recipe["gate_exit_code"] == 0 and recipe["steps"] == 2 and recipe["healthy"] is False
    assert "no_signal_all_fail" in {f["id"] for f in recipe["findings"] if f["kind"] == "training"}
    for seed in ("3407", "11"):  # one learning run and one script per seed
        pipeline, script = result["pipeline"][seed], result["script"][seed]
        assert pipeline["gate_exit_code"] == 1 and "grpo.deviation is not set" in pipeline["gate"]
        assert script["exit"] == 0 and len(script["reward_curve"]) == 2 and "ci95" in script["held_out"]
    assert set(result["gain_points"]["script"]["per_seed"]) == {"3407", "11"}
