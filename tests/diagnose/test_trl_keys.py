"""A real TRL 1.16 GRPOTrainer run on CPU, diagnosed: guards the metric key names against TRL drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_finetuning.diagnose import diagnose, load_context, load_trajectory


@pytest.mark.slow
def test_a_fresh_truncated_trl_run_is_diagnosed_as_truncation(tmp_path: Path) -> None:
    from .make_real_fixtures import make_run

    run = make_run("truncation", tmp_path, out=tmp_path / "run", max_steps=3)
    traj = load_trajectory(run)
    assert traj.ended and traj.steps == [1, 2, 3]
    read = {"reward", "reward_std", "frac_reward_zero_std", "rewards/correct/mean", "completions/mean_length",
            "completions/clipped_ratio", "completions/mean_terminated_length", "entropy", "kl",
            "clip_ratio/region_mean", "grad_norm", "learning_rate", "loss"}
    assert read <= traj.keys()
    assert "truncation" in {f.id for f in diagnose(traj, load_context(run))}
