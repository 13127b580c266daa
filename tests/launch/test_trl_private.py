"""The private TRL and transformers names `launch.trl_private` lists still hold on the installed versions, and
the public behaviour the trainer builds on instead (on_save after a whole checkpoint) still holds: a TRL upgrade
that moves one fails here, not in a training run."""

from __future__ import annotations

import gc
import importlib
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from llm_finetuning.launch.trl_private import PRIVATE_USES, TRL_VERSION, PrivateUse, last_generation_batch

METHODS = [use for use in PRIVATE_USES if use.how in ("mirrored", "wrapped")]


def _owner(use: PrivateUse) -> Any:
    module, _, name = use.owner.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_the_installed_trl_is_the_one_the_private_uses_were_checked_against() -> None:
    import trl

    # a new TRL: check every entry of PRIVATE_USES against its source, then move TRL_VERSION (and pyproject's pin)
    assert trl.__version__ == TRL_VERSION


def test_each_private_use_is_named_once() -> None:
    keys = [(use.owner, use.name) for use in PRIVATE_USES]
    assert len(keys) == len(set(keys))
    assert all(use.why and use.where for use in PRIVATE_USES)


@pytest.mark.parametrize("use", METHODS, ids=[use.name for use in METHODS])
def test_each_private_method_exists_with_the_parameters_relied_on(use: PrivateUse) -> None:
    method = getattr(_owner(use), use.name)
    assert callable(method)
    if use.parameters is not None:
        assert tuple(inspect.signature(method).parameters) == use.parameters


def test_the_static_cache_memo_is_written_only_where_transformers_lacks_the_public_field() -> None:
    from transformers import GenerationConfig, GenerationMixin

    if hasattr(GenerationConfig(), "max_cache_len"):  # compile_decoding sets it and never calls presize_static_cache
        return
    assert "_previous_max_cache_length" in inspect.getsource(GenerationMixin)


@pytest.mark.slow
def test_trls_generation_batch_and_a_whole_checkpoint_reach_ourtraining_callbacks(tmp_path: Path,
                                                                         tiny_model_dir: Path) -> None:
    """Two steps of TRL's GRPOTrainer with our callbacks: `_logs` holds one generation batch with every reward
    function's values, completions.jsonl gets them, and at on_save the folder is whole (trainer_state.json
    written) and save_total_limit's rotation has run, so the COMPLETE marker is the last thing written."""
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from llm_finetuning.launch.callbacks import CompletionLog, training_callbacks
    from llm_finetuning.launch.trainer import StopFlag
    from llm_finetuning.rundir.checkpoints import is_complete

    def length(completions: list[Any], **_: Any) -> list[float]:
        return [float(len(str(c))) for c in completions]

    seen: list[dict[str, Any]] = []

    class SeesTheSave(TrainerCallback):
        def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            out = Path(args.output_dir)
            seen.append({"step": state.global_step, "folders": sorted(p.name for p in out.glob("checkpoint-*")),
                         "state": (out / f"checkpoint-{state.global_step}" / "trainer_state.json").is_file(),
                         "complete": is_complete(out / f"checkpoint-{state.global_step}")})

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.padding_side = "left"
    config = GRPOConfig(output_dir=str(tmp_path / "checkpoints"), use_cpu=True, max_steps=2, save_steps=1,
                        save_total_limit=1, logging_steps=1, per_device_train_batch_size=2, num_generations=2,
                        max_completion_length=4, report_to="none")
    trainer = GRPOTrainer(model=str(tiny_model_dir), reward_funcs=length, args=config,
                          train_dataset=Dataset.from_list([{"prompt": "2+3?"}] * 4), processing_class=tokenizer,
                          callbacks=training_callbacks(tmp_path, StopFlag(), progress=False))
    trainer.add_callback(CompletionLog(tmp_path, trainer))
    trainer.add_callback(SeesTheSave())
    try:
        trainer.train()
    finally:
        gc.unfreeze()  # our FreezeHeap ran outside `process_state_for_training`, which would undo it

    prompts, completions, rewards = last_generation_batch(trainer)
    assert len(prompts) == len(completions) == 2 and list(rewards) == ["length"] and len(rewards["length"]) == 2
    rows = [json.loads(line) for line in (tmp_path / "completions.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 1, 2, 2]
    assert rows[-1]["completion"] == completions[-1] and rows[-1]["rewards"] == {"length": rewards["length"][-1]}
    # our commit ran before this later callback; the older checkpoint was rotated away before on_save
    assert seen == [{"step": 1, "folders": ["checkpoint-1"], "state": True, "complete": True},
                    {"step": 2, "folders": ["checkpoint-2"], "state": True, "complete": True}]
