"""Build and run TRL's GRPOTrainer from a verified run directory (heavy: imports inside functions).

grpo_config.yaml is parsed by TRL's own parser for `trl grpo` (GRPOScriptArguments, GRPOConfig,
ModelConfig, DatasetMixtureConfig), so `finetune launch` and `trl grpo --config` read the same values.
On top of TRL's script this adds: model resolution (embedded/GGUF models), the brief's prompt field and
system prompt, metrics.jsonl and completions.jsonl, a progress bar on stderr, checkpoints that count only
once committed, and a checkpoint before exiting on SIGINT/SIGTERM.
"""

from __future__ import annotations

import gc
import importlib
import json
import math
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_finetuning.brief import Brief, DataSpec
from llm_finetuning.brief.columns import require_columns
from llm_finetuning.cputhreads import size_torch_threads
from llm_finetuning.errors import EXIT_REJECTED, EXIT_UNUSABLE, Problem, UnusableInput
from llm_finetuning.fileio import atomic_write_text, compiled_from_source, replace_folder
from llm_finetuning.launch import LaunchRefused
from llm_finetuning.rundir import COMPLETIONS, END_EVENT, EVAL_JSONL, FINAL_MODEL, METRICS
from llm_finetuning.rundir.checkpoints import (
    commit_checkpoint,
    last_complete_checkpoint,
    set_aside_incomplete,
    start_problem,
)

if TYPE_CHECKING:
    from llm_finetuning.evaluation.during import HeldOutEvaluator


@dataclass
class TrainOutcome:
    global_step: int
    max_steps: int
    stopped_by: str | None  # signal name when a signal ended the run early
    checkpoint: str | None  # last committed checkpoint
    final_model: str | None


class _StopFlag:
    """Set by SIGINT/SIGTERM; the trainer saves a checkpoint at the end of the current step and stops."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: Any) -> None:
        self.signal_name = signal.Signals(signum).name
        print(f"\nfinetune launch: {self.signal_name} received; saving a checkpoint at the end of this step "
              "(send it again to stop at once)", file=sys.stderr, flush=True)
        signal.signal(signum, signal.SIG_DFL)


def _clean(value: Any) -> Any:
    """JSON-safe metric values: NaN and infinities become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


def _jsonl_append(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        fh.flush()


def _truncate_jsonl(path: Path, max_step: int) -> None:
    """Drop rows logged after `max_step` (a killed run logged steps its checkpoint does not hold)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill
        if isinstance(row, dict) and "event" not in row and int(row.get("step", 0)) <= max_step:
            kept.append(line)
    atomic_write_text(path, "".join(k + "\n" for k in kept), 0o644)


def _callbacks(run_dir: Path, stop: _StopFlag, progress: bool, evaluator: Any = None) -> list[Any]:
    import torch
    from transformers import TrainerCallback

    class HeldOutEval(TrainerCallback):
        """The brief's held_out_eval: the policy scored on held-out prompts every N steps (eval.jsonl)."""

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.is_world_process_zero and state.global_step == 0:
                evaluator.write_base_row()

        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, processing_class: Any = None,
                        **kw: Any) -> None:
            if state.is_world_process_zero and evaluator.due(state.global_step):
                evaluator.evaluate(model, processing_class, state.global_step)

    class MetricsCallback(TrainerCallback):
        """metrics.jsonl: one object per TRL log event, `step` and `epoch` first, then `elapsed_s`
        (wall-clock seconds since this process began training) and TRL's keys."""

        started = 0.0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.started = time.monotonic()

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if state.is_world_process_zero and logs:
                row = {"step": state.global_step, "epoch": _clean(state.epoch),
                       "elapsed_s": round(time.monotonic() - self.started, 3)}
                row.update({k: _clean(v) for k, v in logs.items()})
                if torch.cuda.is_available():  # this process's peak, to hold against `finetune memory`
                    row["memory/max_allocated_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
                    row["memory/max_reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 3)
                _jsonl_append(run_dir / METRICS, [row])

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            # The end marker `finetune diagnose --follow` and the gate's deviation check wait for; a run
            # stopped early by a signal has not ended and gets none.
            if state.is_world_process_zero and stop.signal_name is None and state.global_step >= state.max_steps:
                _jsonl_append(run_dir / METRICS, [{"event": END_EVENT, "step": state.global_step}])

    class StopOnSignal(TrainerCallback):
        """Checkpoint and stop at a step boundary once a signal arrived on any process."""

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            flag = stop.signal_name is not None
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

        bar: Any = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.is_world_process_zero:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc="GRPO", unit="step",
                                file=sys.stderr, dynamic_ncols=True)

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.bar is not None:
                self.bar.update(state.global_step - self.bar.n)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if self.bar is not None and logs:
                shown = {k: f"{v:.3g}" for k, v in logs.items()
                         if k in ("reward", "loss", "kl", "entropy") and isinstance(v, (int, float))}
                self.bar.set_postfix(shown, refresh=False)

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.bar is not None:
                self.bar.close()
                self.bar = None

    class FreezeHeap(TrainerCallback):
        """After this process's first step, collect once and move every object then alive into the permanent
        generation (`gc.freeze`). The first step leaves the models, the data loader and compiled decoding's graphs
        behind, millions of long-lived objects; without this, every later full collection walks them all and pauses
        a step (docs/results.md, where a step's time goes)."""

        frozen = False

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if not self.frozen:
                self.frozen = True
                gc.collect()
                gc.freeze()

    out: list[Any] = [MetricsCallback(), StopOnSignal(), FreezeHeap()] + \
        ([HeldOutEval()] if evaluator is not None else [])
    if progress:
        out.append(Progress())
    return out


def _trainer_class() -> Any:
    from trl import GRPOTrainer

    class RunTrainer(GRPOTrainer):
        """GRPOTrainer that commits checkpoints and writes completions.jsonl."""

        _lf_run_dir: Path
        _lf_last_batch: Any = None

        def _save_checkpoint(self, model: Any, trial: Any) -> None:
            super()._save_checkpoint(model, trial)
            self.accelerator.wait_for_everyone()
            if self.args.should_save:
                folder = Path(self._get_output_dir(trial=trial)) / f"checkpoint-{self.state.global_step}"
                commit_checkpoint(folder, self.state.global_step)
            self.accelerator.wait_for_everyone()

        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            super().log(logs, start_time)
            if not self.accelerator.is_main_process or not getattr(self.model, "training", False):
                return
            logged: dict[str, Any] = dict(self._logs)  # TRL's buffers of the last generation batch
            prompts, completions = logged["prompt"], logged["completion"]
            if not completions:
                return
            batch = (len(completions), id(completions[-1]), id(completions[0]))
            if batch == self._lf_last_batch:
                return  # no new generation since the last log event
            self._lf_last_batch = batch
            rewards = {name: list(values) for name, values in logged["rewards"].items()}
            rows = []
            for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=False)):
                rows.append({"step": self.state.global_step, "prompt": prompt, "completion": completion,
                             "rewards": {name: _clean(v[i]) if i < len(v) else None for name, v in rewards.items()}})
            _jsonl_append(self._lf_run_dir / COMPLETIONS, rows)

    return RunTrainer


def _resolve_model(brief: Brief) -> tuple[str, Any]:
    """(path for from_pretrained, resolved model). Embedded and GGUF models are dequantised once."""
    from llm_finetuning.models import resolve_model

    resolved = resolve_model(brief.model, brief.folder)
    return str(resolved.path), resolved


def _prepare_dataset(dataset: Any, data: DataSpec, tokenizer: Any) -> Any:
    """The brief's prompt field becomes `prompt`; string prompts become chat messages when the model has a
    chat template (the way baseline and inspection sampled them), with data.system_prompt first."""
    field = data.prompt_field
    if field not in dataset.column_names:
        raise LaunchRefused([Problem("missing_column", "data.prompt_field", f"column {field!r} is not in the "
                                     f"training data (columns: {', '.join(dataset.column_names)}).",
                                     "set data.prompt_field to the prompt column")], EXIT_UNUSABLE)
    if field != "prompt":
        if "prompt" in dataset.column_names:
            dataset = dataset.remove_columns("prompt")
        dataset = dataset.rename_column(field, "prompt")
    system = data.system_prompt
    chat = bool(getattr(tokenizer, "chat_template", None)) if tokenizer is not None else bool(system)

    def to_messages(row: dict[str, Any]) -> dict[str, Any]:
        prompt = row["prompt"]
        if isinstance(prompt, str) and (chat or system):
            messages = ([{"role": "system", "content": system}] if system else []) + \
                [{"role": "user", "content": prompt}]
            return {"prompt": messages}
        return {"prompt": prompt}

    if chat or system:
        dataset = dataset.map(to_messages)
    return dataset


def _held_out_evaluator(brief: Brief, run_dir: Path, training_args: Any) -> HeldOutEvaluator | None:
    """The brief's held_out_eval as an evaluator, or None (off, or a run of several processes, said once)."""
    from llm_finetuning.errors import UnusableInput
    from llm_finetuning.evaluation.during import HeldOutEvaluator

    if not brief.held_out_eval.every_steps:
        return None
    if int(getattr(training_args, "world_size", 1)) > 1:
        print("finetune launch: held_out_eval runs in single-process runs only (the policy is sharded here); "
              "score the checkpoints afterwards with `finetune eval RUN_DIR --checkpoint all`", file=sys.stderr)
        return None
    try:
        return HeldOutEvaluator.from_brief(brief, run_dir)
    except UnusableInput as exc:
        raise LaunchRefused([exc.problem], EXIT_UNUSABLE, why="the brief's held_out_eval cannot run") from None


def _load_tokenizer(resolved: Any) -> Any:
    from llm_finetuning.models import load_tokenizer

    tok = load_tokenizer(resolved)
    tok.padding_side = "left"  # decoder-only generation pads on the left, as TRL's own loader does
    tok.truncation_side = "left"
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    return tok


def _episode_kwargs(brief: Brief, tokenizer: Any) -> dict[str, Any]:
    """GRPOTrainer's tools= or environment_factory= for a tool-use brief ({} without one), each tool call
    under episode.tool_timeout_s; the tokenizer gets the brief's chat template and TRL's response parser,
    exactly as sampling gave them (`sampling.episode`)."""
    from llm_finetuning.errors import UnusableInput
    from llm_finetuning.sampling.episode import load_toolbox, prepare_tokenizer

    spec = brief.episode
    if spec is None:
        return {}
    try:
        prepare_tokenizer(tokenizer, spec, brief.folder)
    except UnusableInput as exc:
        raise LaunchRefused([exc.problem], EXIT_UNUSABLE) from None
    box = load_toolbox(spec, brief.folder)
    return {"tools": box.tools or None, "environment_factory": box.environment}


def train(run_dir: Path, brief: Brief, resume: bool = False, extra_args: list[str] | None = None,
          progress: bool = True) -> TrainOutcome:
    """Train the verified run in `run_dir` in this process (one of several under accelerate, or alone)."""
    run_dir = Path(run_dir).resolve()
    os.chdir(run_dir)
    if str(run_dir) not in sys.path:
        sys.path.insert(0, str(run_dir))
    from trl import get_dataset, get_peft_config, get_quantization_config
    from trl.scripts.grpo import make_parser

    parser = make_parser()
    argv = ["--config", "grpo_config.yaml", *(extra_args or [])]
    script_args, training_args, model_args, dataset_args, _rest = parser.parse_args_and_config(
        argv, return_remaining_strings=True)

    import torch

    if training_args.use_cpu or not torch.cuda.is_available():
        # generation and training share this process's threads: size them as the sampler does
        size_torch_threads(torch, "Training")
    if "tensorboard" in (training_args.report_to or []):  # event files beside metrics.jsonl, not in checkpoints/
        from llm_finetuning.brief.tracking import TENSORBOARD_DIR

        os.environ["TENSORBOARD_LOGGING_DIR"] = str(run_dir / TENSORBOARD_DIR)
    model_path, resolved = _resolve_model(brief)
    output_dir = (run_dir / training_args.output_dir).resolve()
    training_args.output_dir = str(output_dir)

    checkpoint: Path | None = None
    problem = start_problem(output_dir, resume)
    if problem:
        raise LaunchRefused([problem], EXIT_REJECTED)
    if resume:
        set_aside_incomplete(output_dir)
        checkpoint = last_complete_checkpoint(output_dir)
        assert checkpoint is not None  # start_problem said so
        step = int(checkpoint.name.rsplit("-", 1)[1])
        _truncate_jsonl(run_dir / METRICS, step)
        _truncate_jsonl(run_dir / COMPLETIONS, step)
        _truncate_jsonl(run_dir / EVAL_JSONL, step)
    else:
        for name in (METRICS, COMPLETIONS, EVAL_JSONL):
            (run_dir / name).unlink(missing_ok=True)

    model_init_kwargs = {
        "revision": model_args.model_revision,
        "trust_remote_code": training_args.trust_remote_code,
        "attn_implementation": model_args.attn_implementation,
        "dtype": model_args.dtype,
    }
    model_init_kwargs.update(training_args.model_init_kwargs or {})
    if getattr(resolved, "revision", None) is None and model_path != model_args.model_name_or_path:
        model_init_kwargs.pop("revision", None)  # a dequantised local copy has no hub revision
    training_args.model_init_kwargs = model_init_kwargs

    cached = sys.modules.get("rewards_entry")
    if cached is not None and Path(getattr(cached, "__file__", "")).resolve() != run_dir / "rewards_entry.py":
        del sys.modules["rewards_entry"]  # another run's rewards, imported earlier in this process
    reward_funcs = []
    with compiled_from_source():  # rewards_entry.py as verified against a fresh render, not a .pyc beside it
        for ref in script_args.reward_funcs or []:
            module, _, attr = ref.rpartition(".")
            reward_funcs.append(getattr(importlib.import_module(module), attr))

    tokenizer = _load_tokenizer(resolved)
    dataset = get_dataset(dataset_args)[script_args.dataset_train_split]
    try:  # a hub dataset is first seen here: its columns against the rewards', before any model loads
        require_columns(brief.data, brief.rewards, [dict.fromkeys(dataset.column_names)], "the training data")
    except UnusableInput as exc:
        raise LaunchRefused([exc.problem], EXIT_UNUSABLE) from None
    dataset = _prepare_dataset(dataset, brief.data, tokenizer)
    episode_kwargs = _episode_kwargs(brief, tokenizer)

    stop = _StopFlag()
    trainer_cls = _trainer_class()
    trainer = trainer_cls(
        model=model_path,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
        quantization_config=get_quantization_config(model_args),
        callbacks=_callbacks(run_dir, stop, progress, _held_out_evaluator(brief, run_dir, training_args)),
        **episode_kwargs,
    )
    trainer._lf_run_dir = run_dir
    if training_args.cache_implementation == "static" and not training_args.use_vllm and torch.cuda.is_available():
        grpo = brief.grpo
        # an episode's later turns start from prompt + the episode so far and may add a whole completion
        turns = 2 if episode_kwargs else 1  # (the memory estimate's Settings.generation_context)
        compile_decoding(trainer, grpo.max_prompt_length + turns * grpo.max_completion_length)
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)

    stop.install()  # kept through the final save: a signal then is deferred, not a kill mid-write
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        # A stop asked after the last step changes nothing: the run is complete and its model is saved.
        finished = trainer.state.global_step >= trainer.state.max_steps
        final_model = _save_final(trainer, run_dir) if finished or stop.signal_name is None else None
    finally:
        stop.restore()
    last = last_complete_checkpoint(output_dir)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return TrainOutcome(
        global_step=int(trainer.state.global_step), max_steps=int(trainer.state.max_steps),
        stopped_by=None if finished else stop.signal_name, checkpoint=str(last) if last else None,
        final_model=final_model,
    )


def compile_cache_dir() -> Path:
    """Where compiled decoding's inductor kernels persist between runs: the product's cache folder."""
    from llm_finetuning.models import cache_root

    return cache_root() / "torch-compile"


def compile_decoding(trainer: Any, max_cache_len: int) -> None:
    """Decode from the static KV cache through a compiled forward (CUDA graphs) instead of TRL's eager one.

    TRL builds its GenerationConfig with `disable_compile=True`; this lifts it. The cache is sized once for the
    longest prompt and completion the brief allows, so prompts of other lengths reuse the same cache and the same
    graphs instead of recompiling (transformers grows a static cache to the longest call it has seen).

    The compiled kernels go to a persistent cache, `compile_cache_dir()`, unless TORCHINDUCTOR_CACHE_DIR says
    otherwise: a resumed or re-rendered run of the same model and shapes loads them instead of compiling again
    (about half of the first step on an H200, docs/results.md), also where /tmp, inductor's default, is not kept."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(compile_cache_dir()))
    config = trainer.generation_config
    config.disable_compile = False
    if hasattr(config, "max_cache_len"):
        config.max_cache_len = max_cache_len
    model = trainer.model
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    for module in {id(model): model, id(base): base}.values():
        module._previous_max_cache_length = max(max_cache_len, getattr(module, "_previous_max_cache_length", 0))


def _save_final(trainer: Any, run_dir: Path) -> str:
    """The trained weights (or adapter) in RUN_DIR/model, swapped in whole (temp folder, then rename)."""
    tmp = run_dir / f".{FINAL_MODEL}.tmp"
    final = run_dir / FINAL_MODEL
    if trainer.accelerator.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    trainer.accelerator.wait_for_everyone()
    trainer.save_model(str(tmp))
    trainer.accelerator.wait_for_everyone()
    if trainer.accelerator.is_main_process:
        replace_folder(tmp, final)
    trainer.accelerator.wait_for_everyone()
    return str(final)
