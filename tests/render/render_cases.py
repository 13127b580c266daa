"""The golden cases: input briefs, the memory advice fixed per case, and how each is rendered."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

BRIEFS = Path(__file__).parent / "briefs"
GOLDEN = Path(__file__).resolve().parents[1] / "golden"
CASES = sorted(p.stem for p in BRIEFS.glob("*.yaml"))

# What the memory estimate would advise, fixed per case so golden files test the renderer alone
# (the estimator's own numbers are the memory helper's tests).
RECOMMEND: dict[str, dict[str, Any]] = {
    "single-gpu-full": {},  # no estimate: TRL's 0.3 and sleep mode off
    "lora": {"distributed": "single"},
    "qlora": {"vllm_gpu_memory_utilization": 0.35, "vllm_enable_sleep_mode": True, "distributed": "single"},
    "variant-gspo": {"vllm_gpu_memory_utilization": 0.4, "vllm_enable_sleep_mode": False, "distributed": "single"},
    "vllm-server-8gpu": {"distributed": "zero2"},
    "two-nodes": {"distributed": "zero3", "vllm_gpu_memory_utilization": 0.25, "vllm_enable_sleep_mode": True},
    "three-nodes-server": {"distributed": "fsdp2"},
}

TRAIN_ROWS = '{"prompt": "What is 2 + 3? Reply with only the number.", "answer": "5"}\n'


def stage_brief(case: str, root: Path) -> Path:
    """Copy the case's brief into `root/<case>/brief.yaml` with a small data file beside it."""
    folder = root / case
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "data" / "train.jsonl").write_text(TRAIN_ROWS, encoding="utf-8")
    shutil.copy(BRIEFS / f"{case}.yaml", folder / "brief.yaml")
    return folder / "brief.yaml"


def render_case(case: str, root: Path) -> Path:
    """Render the case into `root/<case>/run` and return the run directory."""
    from llm_finetuning.brief import load_brief
    from llm_finetuning.render import render_run

    brief, errors = load_brief(stage_brief(case, root))
    assert brief is not None, errors
    run_dir = root / case / "run"
    render_run(brief, run_dir, "golden-gate-fingerprint", RECOMMEND.get(case, {}))
    return run_dir
