"""Trajectories from real TRL 1.16 GRPOTrainer runs (tests/diagnose/make_real_fixtures.py), diagnosed.

- real-healthy: reward climbs from about 0.06 to 0.2-0.5; one transient KL/grad-norm spike (step 7) that
  recovers: healthy.
- real-truncation: max_completion_length 4 on a random model: nothing terminates (truncation, error);
  as a consequence every reward is 0 (no_signal_all_fail) and loss and gradient are 0 (zero_loss).
- real-hackable: a `digits_only` format reward climbs while `correct` stays at 0: reward_hacking; the
  learning rate (1e-3, to move a tiny model in 30 steps) also makes KL and grad norm spike at steps 11-12
  and 26-27: kl_blowup.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.diagnose import diagnose, load_context, load_trajectory
from llm_finetuning.records.diagnosis import verify_diagnosis

FIXTURES = Path(__file__).parent / "fixtures"


def findings(name: str) -> dict[str, dict]:  # type: ignore[type-arg]
    run = FIXTURES / name
    return {f.id: f.to_json() for f in diagnose(load_trajectory(run), load_context(run))}


def test_real_healthy_run_is_healthy_and_justifies_a_deviation(tmp_path: Path) -> None:
    assert findings("real-healthy") == {}
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "real-healthy", run)
    result = CliRunner().invoke(cli, ["diagnose", str(run), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == {"healthy": True, "findings": [], "task": []}
    assert verify_diagnosis(run) == []


def test_real_truncated_run_is_truncation() -> None:
    found = findings("real-truncation")
    f = found["truncation"]
    assert f["severity"] == "error" and f["evidence"]["clipped_ratio_late"] == 1.0
    assert f["evidence"]["mean_terminated_length_late"] == 0
    assert next(iter(found)) == "truncation"  # the root cause is listed first
    assert set(found) == {"truncation", "no_signal_all_fail", "zero_loss"}


def test_real_hackable_run_is_reward_hacking_on_the_format_reward() -> None:
    found = findings("real-hackable")
    f = found["reward_hacking"]
    assert f["evidence"]["correctness"] == "correct" and "digits_only" in f["evidence"]["message"]
    assert f["evidence"]["samples_shaping_pass_correct_fail"] > 0.5  # from completions.jsonl
    assert "fn: digits_only" in f["brief_edit"]
    assert set(found) == {"reward_hacking", "kl_blowup"}
    assert found["kl_blowup"]["steps"] == [11, 12, 26, 27]


def test_trainer_state_alone_gives_the_same_diagnosis(tmp_path: Path) -> None:
    for name in ("real-healthy", "real-truncation", "real-hackable"):
        run = tmp_path / name
        run.mkdir()
        shutil.copy(FIXTURES / name / "trainer_state.json", run / "trainer_state.json")
        ids = {f.id for f in diagnose(load_trajectory(run), load_context(run))}
        assert ids == set(findings(name)), name


# Two H200 runs of the learning benchmark (examples/smollm2-json, the recipe's settings, 40 steps):
# at max_completion_length 48 the model's rambling answers were cut 45% of the time (truncation, a
# warning: the answers that end do end at ~24 tokens); at 128 the same run was healthy and justified the
# example's learning-rate deviation.
def test_h200_run_cut_at_48_tokens_is_truncation() -> None:
    found = findings("h200-smollm2-truncation")
    assert set(found) == {"truncation"}
    assert found["truncation"]["severity"] == "warning"
    assert found["truncation"]["evidence"]["clipped_ratio_late"] >= 0.3


def test_h200_recipe_run_at_128_tokens_is_healthy() -> None:
    assert findings("h200-smollm2-recipe") == {}
