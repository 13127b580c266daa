"""Every built-in reward of this area trains inside TRL's GRPOTrainer (tiny model, CPU, 2 steps)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PERSON = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}


def test_grpo_trains_with_every_reward(tmp_path: Path, tiny_model_dir: Path, judge_server) -> None:  # type: ignore[no-untyped-def]
    from datasets import Dataset
    from transformers import PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    from llm_finetuning.brief import load_brief
    from llm_finetuning.rewards import build_reward_funcs

    rows = [{"prompt": f"What is {a} + {b}? Reply with only the number.", "answer": str(a + b),
             "schema": json.dumps(PERSON)} for a, b in ((1, 2), (3, 4))]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    brief_yaml = {
        "brief": 1, "name": "rewards-train", "method": "grpo", "task": {"summary": "tiny"},
        "model": {"id": str(tiny_model_dir), "dtype": "float32"},
        "data": {"train": "train.jsonl"},
        "rewards": [
            {"fn": "exact_match", "args": {"extract": "last_number"}},
            {"fn": "json_schema", "args": {"schema_field": "schema"}},
            {"fn": "length_penalty", "weight": 0.5},
            {"fn": "judge", "weight": 0.5, "args": {"endpoint": judge_server.url("ok"), "model": "tiny",
                                                    "rubric": "A correct number.", "timeout_s": 10}},
        ],
        "grpo": {"num_generations": 4, "max_completion_length": 8, "max_steps": 2},
        "hardware": {"gpus": 0, "generation": "transformers"},
    }
    (tmp_path / "brief.yaml").write_text(json.dumps(brief_yaml))
    brief, errors = load_brief(tmp_path / "brief.yaml")
    assert not errors, errors
    funcs, weights = build_reward_funcs(brief)
    assert [f.__name__ for f in funcs] == ["exact_match", "json_schema", "length_penalty", "judge"]

    config = GRPOConfig(output_dir=str(tmp_path / "run"), per_device_train_batch_size=4, num_generations=4,
                        max_completion_length=8, max_steps=2, learning_rate=1e-5, logging_steps=1,
                        reward_weights=weights, report_to="none", save_strategy="no", use_cpu=True, bf16=False,
                        seed=0)
    trainer = GRPOTrainer(model=str(tiny_model_dir), reward_funcs=funcs, args=config,
                          train_dataset=Dataset.from_list(rows),
                          processing_class=PreTrainedTokenizerFast.from_pretrained(tiny_model_dir))
    trainer.train()

    logs = [entry for entry in trainer.state.log_history if "rewards/judge/mean" in entry]
    assert len(logs) == 2
    for entry in logs:
        for name in ("exact_match", "json_schema", "length_penalty", "judge"):
            assert math.isfinite(entry[f"rewards/{name}/mean"])
        assert entry["rewards/judge/failed"] == 0.0  # the metric a failing judge would raise
        assert -1.0 <= entry["rewards/length_penalty/mean"] <= 0.0
    judge = funcs[3]
    # 2 steps x 1 prompt x 4 generations
    assert judge.stats["rows"] == 2 * 4 and judge.stats["failed"] == 0  # type: ignore[attr-defined]
    funcs[0].close()  # type: ignore[attr-defined]
