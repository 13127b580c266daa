"""Build and run TRL's GRPOTrainer from a verified run directory (heavy: imports inside functions).

grpo_config.yaml is parsed by TRL's own parser for `trl grpo` (GRPOScriptArguments, GRPOConfig,
ModelConfig, DatasetMixtureConfig), so `finetune launch` and `trl grpo --config` read the same values.
On top of TRL's script this adds: model resolution (embedded/GGUF models), the brief's prompt field and
system prompt, metrics.jsonl and completions.jsonl, a progress bar on stderr, checkpoints that count only
once committed, and a checkpoint before exiting on SIGINT/SIGTERM.

The trainer is TRL's own GRPOTrainer, extended only through its public surface: callbacks (metrics, completions,
checkpoint commits, the signal stop, the progress bar, held-out evaluation) and constructor arguments. The one
private read left, the completion log's, goes through `launch.trl_private`, which names every private use. What a
run changes in the process (working directory, sys.path, imported reward modules, signal handlers, environment)
happens inside `process_state_for_training`, which puts all of it back.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from llm_finetuning.brief import Brief, DataSpec
from llm_finetuning.brief.columns import require_columns
from llm_finetuning.cputhreads import size_torch_threads
from llm_finetuning.errors import EXIT_REJECTED, EXIT_UNUSABLE, Problem, UnusableInput
from llm_finetuning.fileio import atomic_write_text, replace_folder
from llm_finetuning.launch import LaunchRefused
from llm_finetuning.launch.trl_private import presize_static_cache
from llm_finetuning.rundir import (
    COMPLETIONS,
    EVAL_JSONL,
    FINAL_MODEL,
    GRPO_CONFIG,
    METRICS,
    REWARDS_ENTRY,
)
from llm_finetuning.rundir.checkpoints import (
    last_complete_checkpoint,
    set_aside_incomplete,
    start_problem,
)

if TYPE_CHECKING:
    import torch
    from datasets import Dataset
    from transformers import PreTrainedTokenizerBase
    from trl import DatasetMixtureConfig, GRPOConfig, GRPOTrainer, ModelConfig
    from trl.scripts.grpo import GRPOScriptArguments
    from trl.trainer.grpo_trainer import RewardFunc as TrlRewardFunc

    from llm_finetuning.evaluation.during import HeldOutEvaluator
    from llm_finetuning.models import ResolvedModel
    from llm_finetuning.rewards.code import VerifiedCode


@dataclass
class TrainOutcome:
    global_step: int
    max_steps: int
    stopped_by: str | None  # signal name when a signal ended the run early; "stop.request" for `finetune stop`'s file
    checkpoint: str | None  # last committed checkpoint
    final_model: str | None


class GrpoArguments(NamedTuple):
    """grpo_config.yaml as TRL's parser for `trl grpo` reads it, in the order `make_parser` lists them."""

    script: GRPOScriptArguments
    training: GRPOConfig
    model: ModelConfig
    dataset: DatasetMixtureConfig


@runtime_checkable
class WrapsBaseModel(Protocol):
    """A PEFT model: the transformers model it adapts is `get_base_model()`."""

    def get_base_model(self) -> torch.nn.Module: ...


class StopFlag:
    """Set by SIGINT/SIGTERM once installed; the trainer saves a checkpoint at the end of the current step and
    stops. `process_state_for_training` puts the previous handlers back."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    def install(self) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signal_name = signal.Signals(signum).name
        print(f"\nfinetune launch: {self.signal_name} received; saving a checkpoint at the end of this step "
              "(send it again to stop at once)", file=sys.stderr, flush=True)
        signal.signal(signum, signal.SIG_DFL)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# TRL's own uses of transformers' deprecated names around generation, not ours: see `train`
TRL_DEPRECATED_USES = r"`(is_gradient_checkpointing|gradient_checkpointing_enable|gradient_checkpointing_disable)` is deprecated"
REWARDS_MODULE = "rewards_entry"  # the rendered rewards_entry.py, imported by grpo_config.yaml's reward_funcs


@contextmanager
def process_state_for_training(run_dir: Path, brief_folder: Path) -> Iterator[StopFlag]:
    """The process as a training run needs it, and as it was once the block exits (an exception included).

    Inside: the working directory is `run_dir` (grpo_config.yaml's paths are relative to it), `run_dir` is first
    on sys.path (reward_funcs name `rewards_entry.<attr>`), and a `rewards_entry` another run imported earlier is
    set aside. The yielded stop flag's SIGINT/SIGTERM handlers are installed by the caller when training starts
    (a signal while the model loads still stops at once). On exit the working directory, sys.path, os.environ
    (TensorBoard's folder, inductor's cache, what TrainingArguments sets), the signal handlers, torch's thread
    count and the heap's freeze (where nothing was frozen on entry) are as on entry, and the modules imported
    from `run_dir` or `brief_folder` (rewards, custom rewards, tools) are forgotten, the set-aside one restored."""
    import torch

    cwd, path, environ, modules = os.getcwd(), list(sys.path), dict(os.environ), set(sys.modules)
    handlers = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    threads, frozen = torch.get_num_threads(), gc.get_freeze_count()
    set_aside = {}
    cached = sys.modules.get(REWARDS_MODULE)
    if cached is not None and Path(getattr(cached, "__file__", None) or "").resolve() != run_dir / REWARDS_ENTRY:
        set_aside[REWARDS_MODULE] = sys.modules.pop(REWARDS_MODULE)
    try:
        os.chdir(run_dir)
        if str(run_dir) not in sys.path:
            sys.path.insert(0, str(run_dir))
        yield StopFlag()
    finally:
        for sig, handler in handlers.items():
            if handler is not None:  # None: a handler not installed from Python, which cannot be put back
                signal.signal(sig, handler)
        if not frozen and gc.get_freeze_count():
            gc.unfreeze()
        torch.set_num_threads(threads)
        _forget_modules_from(set(sys.modules) - modules, (run_dir, Path(brief_folder).resolve()))
        sys.modules.update(set_aside)
        _restore_environ(environ)
        sys.path[:] = path
        os.chdir(cwd)


def _forget_modules_from(names: set[str], folders: tuple[Path, ...]) -> None:
    """Drop from sys.modules those of `names` imported through one of `folders` on sys.path (a run's own code:
    `folder/<top>.py` or `folder/<top>/...` for a module `<top>.*`); a library in a virtual environment that
    happens to lie inside the brief's folder stays."""
    for name in names:
        file = getattr(sys.modules.get(name), "__file__", None)
        if not file:
            continue
        top, path = name.partition(".")[0], Path(file).resolve()
        for folder in folders:
            if path.is_relative_to(folder) and path.relative_to(folder).parts[0].partition(".")[0] == top:
                del sys.modules[name]
                break


def _restore_environ(environ: dict[str, str]) -> None:
    for name in set(os.environ) - set(environ):
        del os.environ[name]
    for name, value in environ.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


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


def _resolve_model(brief: Brief) -> tuple[str, ResolvedModel]:
    """(path for from_pretrained, resolved model). Embedded and GGUF models are dequantised once."""
    from llm_finetuning.models import resolve_model

    resolved = resolve_model(brief.model, brief.folder)
    return str(resolved.path), resolved


def _prepare_dataset(dataset: Dataset, data: DataSpec, tokenizer: PreTrainedTokenizerBase | None) -> Dataset:
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

    def to_messages(row: Mapping[str, object]) -> dict[str, object]:
        prompt = row["prompt"]
        if isinstance(prompt, str) and (chat or system):
            messages = ([{"role": "system", "content": system}] if system else []) + \
                [{"role": "user", "content": prompt}]
            return {"prompt": messages}
        return {"prompt": prompt}

    if chat or system:
        dataset = dataset.map(to_messages)
    return dataset


def _held_out_evaluator(brief: Brief, run_dir: Path, training_args: GRPOConfig,
                        code: VerifiedCode | None) -> HeldOutEvaluator | None:
    """The brief's held_out_eval as an evaluator, or None (off, or a run of several processes, said once); it
    scores with the rewards and tools of the verified bytes, as training does."""
    from llm_finetuning.errors import UnusableInput
    from llm_finetuning.evaluation.during import HeldOutEvaluator

    if not brief.held_out_eval.every_steps:
        return None
    if int(getattr(training_args, "world_size", 1)) > 1:
        print("finetune launch: held_out_eval runs in single-process runs only (the policy is sharded here); "
              "score the checkpoints afterwards with `finetune eval RUN_DIR --checkpoint all`", file=sys.stderr)
        return None
    try:
        return HeldOutEvaluator.from_brief(brief, run_dir, code)
    except UnusableInput as exc:
        raise LaunchRefused([exc.problem], EXIT_UNUSABLE, why="the brief's held_out_eval cannot run") from None


def _load_tokenizer(resolved: ResolvedModel) -> PreTrainedTokenizerBase:
    from llm_finetuning.models import load_tokenizer

    tok: PreTrainedTokenizerBase = load_tokenizer(resolved)
    tok.padding_side = "left"  # decoder-only generation pads on the left, as TRL's own loader does
    tok.truncation_side = "left"
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    return tok


def _episode_kwargs(brief: Brief, tokenizer: PreTrainedTokenizerBase,
                    code: VerifiedCode | None = None) -> dict[str, Any]:
    """GRPOTrainer's tools= or environment_factory= for a tool-use brief ({} without one), each tool call
    under episode.tool_timeout_s; the tokenizer gets the brief's chat template and TRL's response parser,
    exactly as sampling gave them (`sampling.episode`). Its values stay untyped for GRPOTrainer's keywords:
    `sampling.episode.Environment.reset` returns object, where TRL's EnvironmentFactory declares `str | None`."""
    from llm_finetuning.errors import UnusableInput
    from llm_finetuning.sampling.episode import load_toolbox, prepare_tokenizer

    spec = brief.episode
    if spec is None:
        return {}
    try:
        prepare_tokenizer(tokenizer, spec, brief.folder)
    except UnusableInput as exc:
        raise LaunchRefused([exc.problem], EXIT_UNUSABLE) from None
    box = load_toolbox(spec, brief.folder, code)
    return {"tools": box.tools or None, "environment_factory": box.environment}


def train(run_dir: Path, brief: Brief, resume: bool = False, extra_args: list[str] | None = None,
          progress: bool = True, code: VerifiedCode | None = None) -> TrainOutcome:
    """Train the verified run in `run_dir` in this process (one of several under accelerate, or alone); the
    process is as it was once this returns (`process_state_for_training`). `code`: the reward, tool and
    environment source bytes the verification read (`VerifiedRun.code`); they run in a confined child."""
    run_dir = Path(run_dir).resolve()
    with process_state_for_training(run_dir, brief.folder) as stop, warnings.catch_warnings():
        # TRL 1.16 reads `model.is_gradient_checkpointing` and calls `gradient_checkpointing_disable/enable` around
        # every generation (trl/models/utils.py), names transformers 5.2x deprecated for `activation_*`; the run
        # passes nothing deprecated itself (`_activation_checkpointing_args`), so only these warnings, inside this
        # run, are left out.
        warnings.filterwarnings("ignore", message=TRL_DEPRECATED_USES, category=FutureWarning)
        grpo_args = _parse_grpo_config(extra_args)
        output_dir = _set_up_outputs(grpo_args.training, run_dir)
        checkpoint = _start_or_resume(run_dir, output_dir, resume)
        trainer = _build_trainer(brief, run_dir, stop, progress, grpo_args, code)
        stop.install()  # kept through the final save: a signal then is deferred, not a kill mid-write
        finished, final_model = _train_and_save(trainer, stop, checkpoint, run_dir)
    last = last_complete_checkpoint(output_dir)
    _end_distributed()
    return TrainOutcome(
        global_step=int(trainer.state.global_step), max_steps=int(trainer.state.max_steps),
        stopped_by=None if finished else stop.signal_name, checkpoint=str(last) if last else None,
        final_model=final_model,
    )


def _parse_grpo_config(extra_args: list[str] | None) -> GrpoArguments:
    """grpo_config.yaml (in the working directory) and `extra_args`, read by TRL's parser for `trl grpo`:
    (script_args, training_args, model_args, dataset_args)."""
    from trl.scripts.grpo import make_parser

    argv = ["--config", GRPO_CONFIG, *_activation_checkpointing_args(), *(extra_args or [])]
    script_args, training_args, model_args, dataset_args, _rest = make_parser().parse_args_and_config(
        argv, return_remaining_strings=True)
    return GrpoArguments(script_args, training_args, model_args, dataset_args)


def _activation_checkpointing_args() -> list[str]:
    """transformers 5.2x renamed `gradient_checkpointing` to `activation_checkpointing` and warns (FutureWarning)
    whenever only the old name is set, which TRL 1.16's GRPOConfig does (its default is True) and which
    grpo_config.yaml renders, so that older transformers (5.17 on the GPU machine) still read it. Where the new
    field exists, the rendered value (or TRL's default) is passed under the new name too: the same setting, and
    transformers then mirrors it into the old name without a warning. Empty where the new field does not exist."""
    import dataclasses

    import yaml
    from transformers import TrainingArguments
    from trl import GRPOConfig

    if "activation_checkpointing" not in {f.name for f in dataclasses.fields(TrainingArguments)}:
        return []
    config = yaml.safe_load(Path(GRPO_CONFIG).read_text(encoding="utf-8")) or {}
    default = next(f.default for f in dataclasses.fields(GRPOConfig) if f.name == "gradient_checkpointing")
    value = config.get("gradient_checkpointing", default)
    return [] if value is None else ["--activation_checkpointing", "true" if value else "false"]


def _set_up_outputs(training_args: GRPOConfig, run_dir: Path) -> Path:
    """CPU threads sized as the sampler sizes them (generation and training share them), TensorBoard's event
    files beside metrics.jsonl rather than in checkpoints/, and the checkpoints folder made absolute (returned)."""
    import torch

    if training_args.use_cpu or not torch.cuda.is_available():
        size_torch_threads(torch, "Training")
    if "tensorboard" in (training_args.report_to or []):
        from llm_finetuning.brief.tracking import TENSORBOARD_DIR

        os.environ["TENSORBOARD_LOGGING_DIR"] = str(run_dir / TENSORBOARD_DIR)
    assert training_args.output_dir is not None  # TrainingArguments defaults it to trainer_output
    output_dir = (run_dir / training_args.output_dir).resolve()
    training_args.output_dir = str(output_dir)
    return output_dir


def _start_or_resume(run_dir: Path, output_dir: Path, resume: bool) -> Path | None:
    """The checkpoint to resume from (None for a fresh start), after refusing a start that would overwrite
    checkpoints or a resume with none; a resume sets uncommitted folders aside and drops the log rows
    written after its checkpoint, a fresh start removes the logs of an earlier one."""
    problem = start_problem(output_dir, resume)
    if problem:
        raise LaunchRefused([problem], EXIT_REJECTED)
    if not resume:
        for name in (METRICS, COMPLETIONS, EVAL_JSONL):
            (run_dir / name).unlink(missing_ok=True)
        return None
    set_aside_incomplete(output_dir)
    checkpoint = last_complete_checkpoint(output_dir)
    assert checkpoint is not None  # start_problem said so
    step = int(checkpoint.name.rsplit("-", 1)[1])
    for name in (METRICS, COMPLETIONS, EVAL_JSONL):
        _truncate_jsonl(run_dir / name, step)
    return checkpoint


def _build_trainer(brief: Brief, run_dir: Path, stop: StopFlag, progress: bool, grpo_args: GrpoArguments,
                   code: VerifiedCode | None) -> GRPOTrainer:
    """TRL's GRPOTrainer for the run: its model, rewards, data, tools and our callbacks, decoding compiled where
    the run renders a static cache, and transformers' own progress printing replaced by ours."""
    import torch
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOTrainer, get_peft_config, get_quantization_config

    from llm_finetuning.launch.callbacks import CompletionLog, training_callbacks

    training_args, model_args = grpo_args.training, grpo_args.model
    model_path, resolved = _resolve_model(brief)
    training_args.model_init_kwargs = _model_init_kwargs(training_args, model_args, model_path, resolved)
    reward_funcs = _reward_funcs(brief, code)
    tokenizer = _load_tokenizer(resolved)
    dataset = _training_dataset(brief, grpo_args.script, grpo_args.dataset, tokenizer)
    episode_kwargs = _episode_kwargs(brief, tokenizer, code)
    trainer = GRPOTrainer(
        model=model_path,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
        quantization_config=get_quantization_config(model_args),
        callbacks=training_callbacks(run_dir, stop, progress, _held_out_evaluator(brief, run_dir, training_args,
                                                                                        code)),
        **episode_kwargs,
    )
    trainer.add_callback(CompletionLog(run_dir, trainer))
    if training_args.cache_implementation == "static" and not training_args.use_vllm and torch.cuda.is_available():
        grpo = brief.grpo
        # an episode's later turns start from prompt + the episode so far and may add a whole completion
        turns = 2 if episode_kwargs else 1  # (the memory estimate's Settings.generation_context)
        compile_decoding(trainer, grpo.max_prompt_length + turns * grpo.max_completion_length)
    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)
    return trainer


def _model_init_kwargs(training_args: GRPOConfig, model_args: ModelConfig, model_path: str,
                       resolved: ResolvedModel) -> dict[str, object]:
    """What GRPOTrainer passes to from_pretrained: TRL script's ModelConfig values, then the config's own."""
    kwargs: dict[str, object] = {
        "revision": model_args.model_revision,
        "trust_remote_code": training_args.trust_remote_code,
        "attn_implementation": model_args.attn_implementation,
        "dtype": model_args.dtype,
    }
    configured = training_args.model_init_kwargs
    assert not isinstance(configured, str)  # TrainingArguments parses a JSON string into its dict
    kwargs.update(configured or {})
    if resolved.revision is None and model_path != model_args.model_name_or_path:
        kwargs.pop("revision", None)  # a dequantised local copy has no hub revision
    return kwargs


def _reward_funcs(brief: Brief, code: VerifiedCode | None) -> list[TrlRewardFunc]:
    """The brief's rewards as rewards_entry.py builds them (verified equal to a fresh render), built here from
    the verified brief rather than imported from the run folder, which stays writable after verification; a
    custom reward runs confined, from the source bytes the verification read (`rewards.build.CustomReward`)."""
    from llm_finetuning.rewards.build import build_reward

    return [build_reward(spec.as_mapping(), brief.folder, spec.occurrence,
                         max_completion_length=brief.grpo.max_completion_length, where=f"rewards[{i}]",
                         code=code)
            for i, spec in enumerate(brief.rewards)]


def _training_dataset(brief: Brief, script_args: GRPOScriptArguments, dataset_args: DatasetMixtureConfig,
                      tokenizer: PreTrainedTokenizerBase) -> Dataset:
    """The config's training split, its columns checked against the rewards' (a hub dataset is first seen here,
    before any model loads), with the brief's prompt field and system prompt applied."""
    from trl import get_dataset

    dataset = get_dataset(dataset_args)[script_args.dataset_train_split]
    try:
        require_columns(brief.data, brief.rewards, [dict.fromkeys(dataset.column_names)], "the training data")
    except UnusableInput as exc:
        raise LaunchRefused([exc.problem], EXIT_UNUSABLE) from None
    return _prepare_dataset(dataset, brief.data, tokenizer)


def _train_and_save(trainer: GRPOTrainer, stop: StopFlag, checkpoint: Path | None, run_dir: Path) -> tuple[bool, str | None]:
    """Train (from `checkpoint` when resuming); (whether max_steps was reached, the final model's folder). A run
    a signal stopped early saves no final model; a stop asked after the last step changes nothing."""
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    finished = bool(trainer.state.global_step >= trainer.state.max_steps)
    final_model = _save_final(trainer, run_dir) if finished or stop.signal_name is None else None
    return finished, final_model


def _end_distributed() -> None:
    """Tear down the process group accelerate started for a run of several processes."""
    import torch

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def compile_cache_dir() -> Path:
    """Where compiled decoding's inductor kernels persist between runs: the product's cache folder."""
    from llm_finetuning.cache import cache_root

    return cache_root() / "torch-compile"


def compile_decoding(trainer: GRPOTrainer, max_cache_len: int) -> None:
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
        return
    from transformers import GenerationMixin

    model = trainer.model  # an older transformers: its private memo of the longest cache (launch.trl_private)
    base = model.get_base_model() if isinstance(model, WrapsBaseModel) else model
    for module in {id(model): model, id(base): base}.values():
        if isinstance(module, GenerationMixin):  # the model that generates (a PEFT wrapper hands generate down)
            presize_static_cache(module, max_cache_len)


def _save_final(trainer: GRPOTrainer, run_dir: Path) -> str:
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
