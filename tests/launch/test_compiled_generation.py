"""Compiled decoding: where the renderer turns it on, and what `finetune launch` changes in TRL's trainer.

bench/step_speed.py measures the speed on a GPU (a static KV cache whose decoding is compiled into CUDA graphs:
3.45x `trl grpo` at 135M, 2.97x at 1.5B); these tests pin the choice and the two settings that make it work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_finetuning.brief import load_brief
from llm_finetuning.render.plan import build_plan

BRIEF = """\
brief: 1
name: compiled
method: grpo
task: {summary: Reply with the number}
model: {id: Qwen/Qwen2.5-0.5B-Instruct, dtype: bfloat16, adapter: ADAPTER}
data: {train: data/train.jsonl}
rewards: [{fn: exact_match}]
grpo: {per_device_train_batch_size: 8, gradient_accumulation_steps: 2, max_prompt_length: 64,
       max_completion_length: 32, max_steps: 4}
hardware: HARDWARE
"""


def rendered(tmp_path: Path, adapter: str = "full", recommend: dict[str, Any] | None = None,
             **hardware: Any) -> dict[str, Any]:
    """The GRPOConfig values the renderer writes for a brief with these model and hardware settings."""
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "train.jsonl").write_text('{"prompt": "2+3?", "answer": "5"}\n', encoding="utf-8")
    hw = {"gpus": 1, "generation": "transformers", **hardware}
    path = tmp_path / "brief.yaml"
    path.write_text(BRIEF.replace("ADAPTER", adapter).replace("HARDWARE", yaml.safe_dump(hw, default_flow_style=True)
                                                               .strip()), encoding="utf-8")
    brief, errors = load_brief(path)
    assert brief is not None, errors
    plan = build_plan(brief, tmp_path / "run", recommend or {})
    return {e.key: e.value for _title, entries in plan.sections for e in entries}


@pytest.mark.parametrize("adapter", ["full", "lora"])
def test_full_fine_tuning_and_lora_on_a_gpu_decode_from_a_static_cache(tmp_path: Path, adapter: str) -> None:
    assert rendered(tmp_path, adapter=adapter)["cache_implementation"] == "static"


@pytest.mark.parametrize("case", ["cpu", "opted-out", "qlora", "ddp", "fsdp2", "zero3", "vllm"])
def test_eager_decoding_where_compiled_was_not_measured_faster(tmp_path: Path, case: str) -> None:
    settings: dict[str, Any] = {
        "cpu": {"gpus": 0}, "opted-out": {"compiled_generation": False},
        "qlora": {"adapter": "qlora"}, "ddp": {"gpus": 2, "recommend": {"distributed": "ddp"}},
        "fsdp2": {"gpus": 2, "recommend": {"distributed": "fsdp2"}},
        "zero3": {"gpus": 2, "recommend": {"distributed": "zero3"}}, "vllm": {"generation": "vllm-colocate"},
    }[case]
    assert "cache_implementation" not in rendered(tmp_path, **settings)


def test_launch_lifts_trls_disable_compile_and_sizes_the_cache_once(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL builds its GenerationConfig with disable_compile=True; without lifting it nothing compiles. The static
    cache is sized for the brief's longest prompt and completion, so shorter prompts reuse it (no recompile)."""
    import torch
    import transformers.generation.utils as generation_utils
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from llm_finetuning.launch.trainer import compile_decoding
    from llm_finetuning.testing.tiny import build_tiny_model

    model_dir = build_tiny_model(tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    config = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, max_steps=1, per_device_train_batch_size=2,
                        num_generations=2, max_completion_length=8, cache_implementation="static", report_to="none")
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=lambda completions, **_: [0.0] * len(completions),
                          args=config, train_dataset=Dataset.from_list([{"prompt": "2+3?"}] * 4),
                          processing_class=tokenizer)
    assert trainer.generation_config.disable_compile is True  # TRL's own choice, which launch lifts

    compile_decoding(trainer, max_cache_len=96)
    assert trainer.generation_config.disable_compile is False

    sizes: list[int] = []

    class RecordingCache(generation_utils.StaticCache):  # type: ignore[misc,name-defined]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            sizes.append(int(kwargs["max_cache_len"]))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(generation_utils, "StaticCache", RecordingCache)
    inputs = tokenizer(["2+3?", "a longer prompt than the first one"], return_tensors="pt", padding=True)
    with torch.no_grad():
        out = trainer.model.generate(**inputs, generation_config=trainer.generation_config)
    assert out.shape[1] <= inputs["input_ids"].shape[1] + 8
    assert sizes == [96], f"the static cache was sized {sizes}, not for the brief's longest prompt and completion"
