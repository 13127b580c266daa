"""`finetune memory (--brief BRIEF | --model M) [options] [--json]`: a GRPO run's peak GPU memory per GPU.

Exit 0 fits, 1 does not fit, 2 unusable input. Every option overrides the brief's value. Pure
arithmetic (llm_finetuning.memory): no ML library is imported.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, TypeVar

import click

from llm_finetuning.commands._common import fail, load_checked_brief
from llm_finetuning.errors import EXIT_OK, EXIT_REJECTED, EXIT_UNUSABLE, UnusableInput

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from llm_finetuning.memory import Estimate, Settings

T = TypeVar("T")


class SettingsOptions(TypedDict):
    """The options that override a Settings field of the same name (None: not given)."""

    adapter: str | None
    dtype: str | None
    gpus: int | None
    gpu_memory_gib: float | None
    num_generations: int | None
    per_device_batch: int | None
    gradient_accumulation_steps: int | None
    max_completion_length: int | None
    prompt_tokens: int | None
    beta: float | None
    generation: str | None
    gradient_checkpointing: bool | None
    distributed: str | None
    vllm_gpu_memory_utilization: float | None
    sleep_mode: bool | None  # Settings.vllm_enable_sleep_mode

_LABELS = {
    "policy_weights": "policy weights",
    "adapter_weights": "LoRA adapters (fp32)",
    "autocast_weight_copies": "bf16 copies of fp32 weights (autocast)",
    "reference_weights": "reference model",
    "optimizer_state": "AdamW state",
    "gradients": "gradients (at the optimizer step)",
    "activations": "saved activations",
    "backward_working_set": "backward working set (head, one layer)",
    "generation_kv_cache": "generation KV cache and prefill",
    "vllm": "vLLM share (weights and KV blocks)",
    "vllm_sleeping": "vLLM asleep (residual)",
    "fixed_buffers": "fixed buffers",
    "allocator_slack": "allocator slack",
}


@click.command("memory")
@click.option("--brief", "brief_path", type=click.Path(path_type=Path), help="A GRPO brief (YAML).")
@click.option("--model", "model_id", help="Model folder (config.json), GGUF file, or a known hub id.")
@click.option("--adapter", type=click.Choice(["full", "lora", "qlora"]))
@click.option("--dtype", type=click.Choice(["bfloat16", "float16", "float32"]))
@click.option("--gpus", type=click.IntRange(1, 1024), help="Training GPUs.")
@click.option("--gpu-memory-gib", type=click.FloatRange(min=0.5), help="Memory of one GPU in GiB.")
@click.option("--num-generations", type=click.IntRange(1))
@click.option("--per-device-batch", type=click.IntRange(1), help="per_device_train_batch_size")
@click.option("--gradient-accumulation-steps", type=click.IntRange(1))
@click.option("--max-completion-length", type=click.IntRange(1))
@click.option("--prompt-tokens", type=click.IntRange(1), help="Prompt length (default: max_prompt_length).")
@click.option("--beta", type=click.FloatRange(min=0.0), help="KL weight; 0 drops the reference model.")
@click.option("--generation", type=click.Choice(["transformers", "vllm-colocate", "vllm-server"]))
@click.option("--gradient-checkpointing/--no-gradient-checkpointing", default=None)
@click.option("--distributed", type=click.Choice(["ddp", "zero2", "zero3", "fsdp2"]),
              help="How several GPUs share the model (default: the cheapest that fits).")
@click.option("--vllm-gpu-memory-utilization", type=click.FloatRange(0.05, 0.95))
@click.option("--sleep-mode/--no-sleep-mode", "sleep_mode", default=None, help="vLLM sleep mode (colocate).")
@click.option("--list-models", is_flag=True, help="List the built-in model shapes and exit.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def command(brief_path: Path | None, model_id: str | None, as_json: bool, list_models: bool,
            **options: Unpack[SettingsOptions]) -> None:
    """Predict the peak GPU memory of a GRPO run per GPU and say whether it fits.

    Give a brief (--brief) or a model (--model); options override the brief's values. Exit 0 fits,
    1 does not fit (with the cheapest changes that fit), 2 unusable input.
    """
    from llm_finetuning.memory import Settings, estimate_shape, resolve_shape, settings_from_brief
    from llm_finetuning.memory.shapes import known_ids

    if list_models:
        ids = known_ids()
        click.echo(json.dumps({"models": ids}) if as_json else "\n".join(ids))
        sys.exit(EXIT_OK)
    if (brief_path is None) == (model_id is None):
        fail(UnusableInput("give exactly one of --brief and --model",
                                    "finetune memory --brief brief.yaml, or --model Qwen/Qwen2.5-7B-Instruct"),
                      as_json)
    if brief_path is not None:
        brief = load_checked_brief(str(brief_path), as_json)
        shape = resolve_shape(brief.model.id, brief.model.gguf_file, brief.folder)
        settings = settings_from_brief(brief)
    else:
        assert model_id is not None
        shape = resolve_shape(model_id)
        settings = Settings()
    settings = _with_options(settings, options)
    if settings.generation != "vllm-colocate":
        settings = replace(settings, vllm_gpu_memory_utilization=None, vllm_enable_sleep_mode=None)
    result = estimate_shape(shape, settings)
    if as_json:
        click.echo(json.dumps(result.to_json()))
    else:
        click.echo(render(result))
    sys.exit(EXIT_OK if result.fits else EXIT_REJECTED)


def _given(option: T | None, current: T) -> T:
    return current if option is None else option


def _with_options(settings: Settings, o: SettingsOptions) -> Settings:
    """`settings` with the CLI options given; a given gradient_accumulation_steps also sets steps_per_generation
    back to TRL's default (the same number)."""
    return replace(
        settings,
        adapter=_given(o["adapter"], settings.adapter),
        dtype=_given(o["dtype"], settings.dtype),
        gpus=_given(o["gpus"], settings.gpus),
        gpu_memory_gib=_given(o["gpu_memory_gib"], settings.gpu_memory_gib),
        num_generations=_given(o["num_generations"], settings.num_generations),
        per_device_batch=_given(o["per_device_batch"], settings.per_device_batch),
        gradient_accumulation_steps=_given(o["gradient_accumulation_steps"], settings.gradient_accumulation_steps),
        steps_per_generation=None if o["gradient_accumulation_steps"] is not None else settings.steps_per_generation,
        max_completion_length=_given(o["max_completion_length"], settings.max_completion_length),
        prompt_tokens=_given(o["prompt_tokens"], settings.prompt_tokens),
        beta=_given(o["beta"], settings.beta),
        generation=_given(o["generation"], settings.generation),
        gradient_checkpointing=_given(o["gradient_checkpointing"], settings.gradient_checkpointing),
        distributed=_given(o["distributed"], settings.distributed),
        vllm_gpu_memory_utilization=_given(o["vllm_gpu_memory_utilization"], settings.vllm_gpu_memory_utilization),
        vllm_enable_sleep_mode=_given(o["sleep_mode"], settings.vllm_enable_sleep_mode),
    )


def render(result: Estimate) -> str:
    """The human report: settings, breakdown, total, verdict, recommendations, advice."""
    s = result.settings
    lines = [
        f"{result.model}: {result.params / 1e9:.2f} B parameters, {s.adapter}, {s.dtype}, "
        f"{result.device}, {s.generation}, "
        f"{'gradient checkpointing' if s.gradient_checkpointing else 'no gradient checkpointing'}",
        f"batch: {s.per_device_batch} completions per device step, {s.generation_batch()} generated at once, "
        f"prompt {s.prompt_tokens} + completion {s.max_completion_length} tokens, beta {s.beta:g}, "
        f"distributed: {result.recommend['distributed']}",
        "",
        f"peak {'in RAM' if s.cpu else 'per GPU'} ({result.peak_phase} phase):",
    ]
    for key, value in result.components.items():
        lines.append(f"  {_LABELS.get(key, key):44s} {value:8.2f} GiB")
    lines.append(f"  {'total (PyTorch peak reserved)':44s} {result.total_gib:8.2f} GiB")
    if not s.cpu:
        lines.append(f"  {'+ CUDA context':44s} {result.cuda_context_gib:8.2f} GiB")
    if result.vllm_server_gib is not None:
        lines.append(f"  (the vLLM server GPU needs at least about {result.vllm_server_gib:.1f} GiB: bf16 weights "
                     "and KV blocks for one device's generation batch)")
    verdict = "fits" if result.fits else "does NOT fit"
    lines += ["", f"{verdict}: {result.device_total_gib:.1f} GiB of {result.gpu_memory_gib:g} GiB{' RAM' if s.cpu else ''} "
              f"(headroom {result.headroom_gib:+.1f} GiB)"]
    rec = result.recommend
    if s.generation == "vllm-colocate":
        lines.append(f"recommend: vllm_gpu_memory_utilization {rec['vllm_gpu_memory_utilization']}, "
                     f"vllm_enable_sleep_mode {str(rec['vllm_enable_sleep_mode']).lower()}")
    if result.advice:
        lines.append("cheapest changes that fit:")
        lines += [f"  - {a}" for a in result.advice]
    return "\n".join(lines)


# Keep the exit codes importable for tests and docs.
EXIT_CODES = {"fits": EXIT_OK, "does_not_fit": EXIT_REJECTED, "unusable": EXIT_UNUSABLE}
