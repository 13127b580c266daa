"""Trained runs of the tiny model for the eval and export tests: full fine-tuning and LoRA, 4 CPU steps each."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launch"))

from launch_cases import copy_model, finetune, make_brief  # noqa: E402

LORA = "  dtype: float32\n  adapter: lora\n  lora: {r: 4, alpha: 8, target_modules: all-linear}\n"


def train_run(folder: Path, model: Path, lora: bool = False) -> tuple[Path, Path]:
    """(brief, run directory) of a finished 4-step run with checkpoints at steps 2 and 4."""
    from llm_finetuning.launch import verify_run
    from llm_finetuning.launch.worker import run_worker

    brief = make_brief(folder / "brief", model, max_steps=4, save_steps=2)
    if lora:
        brief.write_text(brief.read_text().replace("  dtype: float32\n", LORA))
    run = folder / "run"
    rendered = finetune("render", str(brief), "-o", str(run))
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    cwd = os.getcwd()
    try:
        assert run_worker(verify_run(run), resume=False, extra_args=[], progress=False) == 0
    finally:
        os.chdir(cwd)  # training runs inside the run directory
    return brief, run


@pytest.fixture(scope="session")
def full_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("full")
    return train_run(root, copy_model(tiny_model_dir, root / "tiny"))


@pytest.fixture(scope="session")
def lora_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("lora")
    return train_run(root, copy_model(tiny_model_dir, root / "tiny"), lora=True)
