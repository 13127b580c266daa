"""The callbacks `finetune launch` gives TRL's GRPOTrainer: metrics.jsonl with its end marker, committed
checkpoints, a stop at a step boundary on a signal, the heap frozen after the first step, held-out evaluation,
a progress bar, and completions.jsonl.

Heavy: this module imports torch and transformers at module level, so only the trainer's own functions import it
(`launch.trainer._build_trainer`); `finetune launch --plan` and the rest of the package never load it. Each class
uses transformers' public callback hooks (`TrainerCallback`); the one private read, TRL's last generation batch,
goes through `launch.trl_private`.
"""

from __future__ import annotations

import gc
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch
from transformers import (
    PreTrainedTokenizerBase,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

from llm_finetuning.launch.trl_private import last_generation_batch
from llm_finetuning.rundir import COMPLETIONS, END_EVENT, METRICS, STOP_REQUEST
from llm_finetuning.rundir.checkpoints import commit_checkpoint

if TYPE_CHECKING:
    from tqdm.auto import tqdm
    from trl import GRPOTrainer

    from llm_finetuning.evaluation.during import HeldOutEvaluator
    from llm_finetuning.models import CausalLM


class Stop(Protocol):
    """What the callbacks read of `launch.trainer.StopFlag`: the name of the signal received, or None."""

    signal_name: str | None


@runtime_checkable
class Scalar(Protocol):
    """A one-element tensor or a numpy scalar: `item()` gives its Python number."""

    def item(self) -> object: ...


def clean(value: object) -> object:
    """JSON-safe metric values: NaN and infinities become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Scalar):
        return clean(value.item())
    return value


def append_jsonl(path: Path, rows: Sequence[Mapping[str, object]]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        fh.flush()


class HeldOutEval(TrainerCallback):
    """The brief's held_out_eval: the policy scored on held-out prompts every N steps (eval.jsonl)."""

    def __init__(self, evaluator: HeldOutEvaluator) -> None:
        self.evaluator = evaluator

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kw: object) -> None:
        if state.is_world_process_zero and state.global_step == 0:
            self.evaluator.write_base_row()

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    model: CausalLM | None = None, processing_class: PreTrainedTokenizerBase | None = None,
                    **kw: object) -> None:
        """`model` is the policy and `processing_class` its tokenizer (launch gives GRPOTrainer a model id and
        a tokenizer: `trainer._build_trainer`); transformers passes both to every event."""
        if state.is_world_process_zero and self.evaluator.due(state.global_step):
            assert model is not None and processing_class is not None
            self.evaluator.evaluate(model, processing_class, state.global_step)


class MetricsLog(TrainerCallback):
    """metrics.jsonl: one object per TRL log event, `step` and `epoch` first, then `elapsed_s` (wall-clock seconds
    since this process began training) and TRL's keys; the end marker once the last step is done."""

    def __init__(self, run_dir: Path, stop: Stop) -> None:
        self.path, self.stop, self.started = run_dir / METRICS, stop, 0.0

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kw: object) -> None:
        self.started = time.monotonic()

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, float] | None = None, **kw: object) -> None:
        if state.is_world_process_zero and logs:
            row = {"step": state.global_step, "epoch": clean(state.epoch),
                   "elapsed_s": round(time.monotonic() - self.started, 3)}
            row.update({k: clean(v) for k, v in logs.items()})
            if torch.cuda.is_available():  # this process's peak, to hold against `finetune memory`
                row["memory/max_allocated_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
                row["memory/max_reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 3)
            append_jsonl(self.path, [row])

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kw: object) -> None:
        # The end marker `finetune diagnose --follow` and the gate's deviation check wait for; a run
        # stopped early by a signal has not ended and gets none.
        if state.is_world_process_zero and self.stop.signal_name is None and state.global_step >= state.max_steps:
            append_jsonl(self.path, [{"event": END_EVENT, "step": state.global_step}])


class StopOnSignal(TrainerCallback):
    """Checkpoint and stop at a step boundary once a signal arrived on any process, or `finetune stop` left its
    request file in the run directory (it reaches the run from any pid namespace)."""

    def __init__(self, stop: Stop, request: Path) -> None:
        self.stop = stop
        self.request = request

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kw: object) -> TrainerControl:
        if self.stop.signal_name is None and self.request.exists():
            self.stop.signal_name = STOP_REQUEST
        flag = self.stop.signal_name is not None
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            device = "cuda" if torch.cuda.is_available() else "cpu"
            t = torch.tensor([1.0 if flag else 0.0], device=device)
            torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
            flag = bool(t.item() > 0)
        if flag:
            control.should_save = True
            control.should_training_stop = True
        return control


class Progress(TrainerCallback):
    """A tqdm bar on stderr: steps, with the latest reward and loss."""

    def __init__(self) -> None:
        self.bar: tqdm | None = None

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kw: object) -> None:
        if state.is_world_process_zero:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc="GRPO", unit="step",
                            file=sys.stderr, dynamic_ncols=True)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kw: object) -> None:
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, float] | None = None, **kw: object) -> None:
        if self.bar is not None and logs:
            shown = {k: f"{v:.3g}" for k, v in logs.items()
                     if k in ("reward", "loss", "kl", "entropy") and isinstance(v, (int, float))}
            self.bar.set_postfix(shown, refresh=False)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kw: object) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class CommitCheckpoints(TrainerCallback):
    """A checkpoint counts once committed (rundir.checkpoints). transformers fires on_save on every process right
    after `_save_checkpoint` returns: the folder is whole by then (TRL's own files and trainer_state.json written,
    save_total_limit's rotation done), so the marker comes last."""

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: object) -> None:
        from accelerate import PartialState
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

        PartialState().wait_for_everyone()  # every process's share of the checkpoint is written
        if args.should_save:
            folder = Path(str(args.output_dir)) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            commit_checkpoint(folder, state.global_step)
        PartialState().wait_for_everyone()


class FreezeHeap(TrainerCallback):
    """After this process's first step, collect once and move every object then alive into the permanent
    generation (`gc.freeze`). The first step leaves the models, the data loader and compiled decoding's graphs
    behind, millions of long-lived objects; without this, every later full collection walks them all and pauses
    a step (docs/results.md, where a step's time goes)."""

    def __init__(self) -> None:
        self.frozen = False

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kw: object) -> None:
        if not self.frozen:
            self.frozen = True
            gc.collect()
            gc.freeze()


class CompletionLog(TrainerCallback):
    """completions.jsonl: at each training log event with a new generation batch, one row per completion (`step`,
    `prompt`, `completion`, `rewards` by function name). TRL keeps the batch only privately
    (`trl_private.last_generation_batch`); this callback holds the trainer to read it there."""

    def __init__(self, run_dir: Path, trainer: GRPOTrainer) -> None:
        self.path, self.trainer = run_dir / COMPLETIONS, trainer
        self.last_batch: tuple[int, int, int] | None = None

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               model: torch.nn.Module | None = None, **kw: object) -> None:
        if not state.is_world_process_zero or model is None or not model.training:
            return
        prompts, completions, rewards = last_generation_batch(self.trainer)
        if not completions:
            return
        batch = (len(completions), id(completions[-1]), id(completions[0]))
        if batch == self.last_batch:
            return  # no new generation since the last log event
        self.last_batch = batch
        rows = [{"step": state.global_step, "prompt": prompt, "completion": completion,
                 "rewards": {name: clean(v[i]) if i < len(v) else None for name, v in rewards.items()}}
                for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=False))]
        append_jsonl(self.path, rows)


def training_callbacks(run_dir: Path, stop: Stop, progress: bool,
                       evaluator: HeldOutEvaluator | None = None) -> list[TrainerCallback]:
    """The callbacks every run trains with, in the order they fire (the completion log is added once the
    trainer exists: `CompletionLog(run_dir, trainer)`)."""
    out: list[TrainerCallback] = [MetricsLog(run_dir, stop), CommitCheckpoints(),
                                   StopOnSignal(stop, run_dir / STOP_REQUEST), FreezeHeap()]
    if evaluator is not None:
        out.append(HeldOutEval(evaluator))
    if progress:
        out.append(Progress())
    return out
