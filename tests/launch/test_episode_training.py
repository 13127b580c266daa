"""Training a tool-use brief: `finetune launch`'s GRPOTrainer gets the brief's tools, and TRL's loss covers
the model's own tokens only, never a tool's result (docs/render-launch.md, Episodes).

One real optimizer step of GRPOTrainer on the tiny random model, on CPU, built with the kwargs launch
builds (`launch.trainer._episode_kwargs`). A random model never writes a tool call, so its first turn is
given: TRL's `_generate_single_turn` answers the first generation with the token ids of a multiply call
(as if the model wrote it); every later turn is the model's own generation. TRL then runs its own tool
loop, masks and loss, which is what this test checks.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/calculator-tools"

CALL = '<tool_call>\n{"name": "multiply", "arguments": {"a": 3, "b": 4}}\n</tool_call><|im_end|>'


@pytest.mark.slow
def test_a_grpo_step_with_a_tool_masks_the_tool_result_out_of_the_loss(tmp_path: Path, tiny_model_dir: Path) -> None:
    import shutil

    import yaml
    from datasets import Dataset
    from transformers import PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    from llm_finetuning.brief import load_brief
    from llm_finetuning.launch.trainer import _episode_kwargs, _load_tokenizer
    from llm_finetuning.models import resolve_model
    from llm_finetuning.rewards import build_reward_funcs
    from llm_finetuning.sampling.episode import tool_suffix_ids

    shutil.copytree(EXAMPLE, tmp_path / "calc")
    brief_path = tmp_path / "calc/brief.yaml"
    data = yaml.safe_load(brief_path.read_text())
    data["model"]["id"] = str(tiny_model_dir)
    brief_path.write_text(yaml.safe_dump(data, sort_keys=False))
    brief, errors = load_brief(brief_path)
    assert not errors, errors
    tokenizer = _load_tokenizer(resolve_model(brief.model, brief.folder))
    assert isinstance(tokenizer, PreTrainedTokenizerFast)
    kwargs = _episode_kwargs(brief, tokenizer)
    assert [t.__name__ for t in kwargs["tools"]] == ["multiply", "add"] and kwargs["environment_factory"] is None
    funcs, weights = build_reward_funcs(brief)
    row = json.loads((brief.folder / "data/train.jsonl").read_text().splitlines()[0])
    row["prompt"] = [{"role": "user", "content": "What is 3 * 4?"}]
    call_ids = tokenizer(CALL, add_special_tokens=False)["input_ids"]
    result = [{"role": "tool", "name": "multiply", "content": "12"}]
    room = len(call_ids) + len(tool_suffix_ids(tokenizer, result, {})) + 4  # the result fits, then 4 tokens
    seen: dict[str, Any] = {}

    class GivenFirstTurn(GRPOTrainer):
        turns = 0

        def _generate_single_turn(self, prompt_ids: Any, *args: Any, **kw: Any) -> Any:
            self.turns += 1
            if self.turns == 1:
                return [list(call_ids) for _ in prompt_ids], None
            return super()._generate_single_turn(prompt_ids, *args, **kw)

        def _compute_loss(self, model: Any, inputs: Any) -> Any:
            seen.setdefault("inputs", {k: v for k, v in inputs.items() if k in ("completion_ids", "completion_mask",
                                                                                 "tool_mask")})
            return super()._compute_loss(model, inputs)

    config = GRPOConfig(output_dir=str(tmp_path / "run"), per_device_train_batch_size=2, num_generations=2,
                        max_completion_length=room, max_steps=1, learning_rate=1e-5, logging_steps=1,
                        reward_weights=weights, report_to="none", save_strategy="no", use_cpu=True, bf16=False,
                        seed=0, max_tool_calling_iterations=2)
    trainer = GivenFirstTurn(model=str(tiny_model_dir), reward_funcs=funcs, args=config,
                             train_dataset=Dataset.from_list([row] * 2), processing_class=tokenizer, **kwargs)
    trainer.train()

    assert trainer.state.global_step == 1 and math.isfinite(trainer.state.log_history[0]["loss"])
    assert trainer.state.log_history[0]["tools/call_frequency"] == 1.0
    assert trainer.state.log_history[0]["tools/failure_frequency"] == 0.0
    inputs = seen["inputs"]
    for ids, mask in zip(inputs["completion_ids"].tolist(), inputs["tool_mask"].tolist(), strict=True):
        tool_part = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m == 0])
        model_part = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m == 1])
        assert "<tool_response>\n12\n</tool_response>" in tool_part  # the result, masked out
        assert model_part.startswith(CALL) and "tool_response" not in model_part
        assert mask[: len(call_ids)] == [1] * len(call_ids)
    loss_mask = inputs["completion_mask"] * inputs["tool_mask"]
    assert int(loss_mask.sum()) < int(inputs["completion_mask"].sum())  # the loss sees fewer tokens than were sampled
