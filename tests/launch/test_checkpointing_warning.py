"""The rendered `gradient_checkpointing` reaches transformers without its FutureWarning (transformers 5.2x renamed
it `activation_checkpointing`), with the same value, whatever the rendered value is; a training step logs no
checkpointing deprecation at all."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
from launch_cases import copy_model, finetune, make_brief

from llm_finetuning.launch import verify_run
from llm_finetuning.launch.trainer import _parse_grpo_config
from llm_finetuning.launch.worker import run_worker


@pytest.mark.parametrize("rendered", [True, False])
def test_no_deprecation_warning_and_the_same_setting(tmp_path: Path, tiny_model_dir: Path, rendered: bool) -> None:
    brief = make_brief(tmp_path / "b", copy_model(tiny_model_dir, tmp_path / "tiny"), max_steps=2)
    text = brief.read_text()
    brief.write_text(text.replace("gradient_checkpointing: false", f"gradient_checkpointing: {str(rendered).lower()}"))
    run = tmp_path / "run"
    assert finetune("render", str(brief), "-o", str(run)).returncode == 0
    assert f"gradient_checkpointing: {str(rendered).lower()}" in (run / "grpo_config.yaml").read_text()
    cwd = os.getcwd()
    os.chdir(run)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            training_args = _parse_grpo_config([])[1]
    finally:
        os.chdir(cwd)
    assert [str(w.message) for w in caught if "checkpointing" in str(w.message)] == []
    assert training_args.gradient_checkpointing is rendered


@pytest.mark.slow
def test_a_training_step_logs_no_checkpointing_deprecation(tmp_path: Path, tiny_model_dir: Path) -> None:
    """Neither our `gradient_checkpointing` nor TRL's read of `is_gradient_checkpointing` reaches the log."""
    brief = make_brief(tmp_path / "b", copy_model(tiny_model_dir, tmp_path / "tiny"), max_steps=1, save_steps=1)
    brief.write_text(brief.read_text().replace("gradient_checkpointing: false", "gradient_checkpointing: true"))
    run = tmp_path / "run"
    assert finetune("render", str(brief), "-o", str(run)).returncode == 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_worker(verify_run(run), resume=False, extra_args=[], progress=False) == 0
    assert [str(w.message) for w in caught if "checkpointing" in str(w.message)] == []
