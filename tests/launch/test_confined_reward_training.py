"""A real CPU training run of the tiny model through a custom reward that runs in the confined child, and the
launch race (docs/security.md, "What runs where"): the reward file swapped after `verify_run` checked it, as an
agent could while the trainer loads the model. The run trains on the bytes that were verified: every reward in
metrics.jsonl and completions.jsonl is the verified reward's 0.25, never the swapped one's 0.777; and the
held-out evaluation during training scores with the verified bytes too."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from launch_cases import TINY_BRIEF, copy_model, finetune

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")]

VERIFIED = "import os\n\ndef score(prompts, completions, **kwargs):\n    return [0.25 for _ in completions]\n"
SWAPPED = "def score(prompts, completions, **kwargs):\n    return [0.777 for _ in completions]\n"


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_model(tiny_model_dir, tmp_path_factory.mktemp("m") / "tiny")


def custom_reward_brief(folder: Path, model: Path, source: str = VERIFIED, extra: str = "") -> Path:
    """The tiny launch brief with one custom reward, `race_reward:score` (`source`), and records bound to it."""
    from _synthetic import synthetic_records

    from llm_finetuning.brief import load_brief

    repo = Path(__file__).resolve().parents[2]
    folder.mkdir(parents=True)
    (folder / "data").mkdir()
    rows = (repo / "examples" / "json-person" / "data" / "train.jsonl").read_text().splitlines()[:16]
    (folder / "data" / "train.jsonl").write_text("\n".join(rows) + "\n")
    (folder / "race_reward.py").write_text(source)
    text = TINY_BRIEF.replace("  - fn: json_schema\n    args: {{schema_field: schema}}\n", "  - fn: race_reward:score\n")
    path = folder / "brief.yaml"
    path.write_text(text.format(model=model, max_steps=2, save_steps=2, gpus=0, generation="transformers", extra=extra))
    brief, errors = load_brief(path)
    assert brief is not None, errors
    synthetic_records(path, "llm-finetuning tests")
    return path


def test_the_trained_run_uses_the_verified_reward_bytes(tmp_path: Path, model: Path) -> None:
    from llm_finetuning.launch import verify_run
    from llm_finetuning.launch.worker import run_worker

    brief = custom_reward_brief(tmp_path / "b", model)
    run_dir = tmp_path / "run"
    done = finetune("render", str(brief), "-o", str(run_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    run = verify_run(run_dir, check_backend=False)
    (brief.parent / "race_reward.py").write_text(SWAPPED)  # after the check, before the trainer loads it
    assert run_worker(run, False, [], progress=False) == 0
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    means = [row["rewards/race_reward:score/mean"] for row in metrics if "rewards/race_reward:score/mean" in row]
    assert means and all(m == pytest.approx(0.25) for m in means), means
    logged = (run_dir / "completions.jsonl").read_text()
    assert "0.25" in logged and "0.777" not in logged


def test_a_reward_changed_before_verification_ends_is_refused(tmp_path: Path, model: Path) -> None:
    """The other side of the race: bytes that differ from the records when verification reads them."""
    from llm_finetuning.launch import LaunchRefused, verify_run
    from llm_finetuning.launch import verified_code as read_code
    from llm_finetuning.rundir.manifest import load_manifest

    brief = custom_reward_brief(tmp_path / "b", model)
    run_dir = tmp_path / "run"
    assert finetune("render", str(brief), "-o", str(run_dir)).returncode == 0
    run = verify_run(run_dir, check_backend=False)
    (brief.parent / "race_reward.py").write_text(SWAPPED)
    with pytest.raises(LaunchRefused) as info:
        read_code(run.brief, run_dir, load_manifest(run_dir))
    assert info.value.problems[0].message == "race_reward.py changed after the run was verified"



def test_the_held_out_evaluation_while_training_scores_with_the_verified_bytes(tmp_path: Path, model: Path) -> None:
    """`held_out_eval` samples and scores the policy inside the trainer's process, after the run was verified:
    with the reward swapped in between, the evaluator the trainer builds (given the verified bytes) scores with
    them (every completion succeeds), where one reading the file would score with the swapped bytes (none do)."""
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    from llm_finetuning.evaluation.during import HeldOutEvaluator
    from llm_finetuning.launch import verified_code, verify_run
    from llm_finetuning.rundir.manifest import load_manifest

    always = "def score(prompts, completions, **kwargs):\n    return [1.0 for _ in completions]\n"
    never = "def score(prompts, completions, **kwargs):\n    return [0.0 for _ in completions]\n"
    brief = custom_reward_brief(tmp_path / "b", model, always, "held_out_eval: {every_steps: 2, prompts: 3, k: 2}\n")
    run_dir = tmp_path / "run"
    done = finetune("render", str(brief), "-o", str(run_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    run = verify_run(run_dir, check_backend=False)
    code = verified_code(run.brief, run_dir, load_manifest(run_dir))
    pinned = HeldOutEvaluator.from_brief(run.brief, run_dir, code)
    reading = HeldOutEvaluator.from_brief(run.brief, run_dir)
    assert pinned is not None and reading is not None
    (brief.parent / "race_reward.py").write_text(never)  # while the run trains
    policy = AutoModelForCausalLM.from_pretrained(model)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(model)
    assert pinned.evaluate(policy, tokenizer, 2)["score"] == 1.0
    assert reading.evaluate(policy, tokenizer, 2)["score"] == 0.0
