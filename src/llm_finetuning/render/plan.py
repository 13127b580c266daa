"""What a run directory must say, computed from a brief: TRL config values, topology, launch commands.

Pure and deterministic: no torch, transformers, trl or vllm import, no clock, no absolute paths in the
output (every local path is written relative to the run directory, where every command runs). The
templates only lay these values out; every decision lives here, with the reason next to it.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from llm_finetuning.brief import Brief, GrpoSpec, HardwareSpec, ModelSpec
from llm_finetuning.brief.schedule import Schedule
from llm_finetuning.brief.sections import DATA_BUILDERS, data_is_local
from llm_finetuning.brief.tracking import tracking_entries
from llm_finetuning.brief.variants import VARIANT_SETTINGS, ConfigValue
from llm_finetuning.errors import Problem, ProblemError
from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.rundir.manifest import Topology

# TRL 1.16 GRPOConfig defaults the recipe disagrees with (loss_type dapo, beta 0.0, learning_rate 1e-6,
# float32 model loading): every value the brief decides is written explicitly.
DEFAULT_VLLM_GPU_MEMORY_UTILIZATION = 0.3
VLLM_SERVER_PORT = 8000
VLLM_SERVER_GPU_MEMORY_UTILIZATION = 0.9
MAIN_PROCESS_PORT = 29500


class RenderError(ProblemError):
    """The brief cannot be rendered into a run TRL accepts; carries every Problem found (exit 2)."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(problems)
        self.args = ("; ".join(p.line() for p in problems),)

    def header(self, subject: Path | str) -> str:
        return f"{subject}: cannot be rendered into a run TRL accepts:"


@functools.lru_cache(maxsize=1)
def trl_fields() -> dict[str, list[str]]:
    """Field names of TRL 1.16's dataclasses (GRPOConfig, ModelConfig, script args), shipped as data.

    A test compares this file with the installed TRL, so render can check overrides without importing it.
    """
    text = resources.files("llm_finetuning.render").joinpath("trl_fields.json").read_text(encoding="utf-8")
    fields: dict[str, list[str]] = json.loads(text)
    return fields


@dataclass(frozen=True)
class Entry:
    """One `key: value` line of grpo_config.yaml with the reason it has that value."""

    key: str
    value: ConfigValue
    why: str = ""


@dataclass
class RunPlan:
    """Everything the templates need. `sections` are grpo_config.yaml's blocks in order."""

    name: str
    brief_sha256: str
    brief_rel: str
    brief_folder_rel: str
    model_ref: str
    model_revision: str | None
    dtype: str
    topology: Topology
    sections: list[tuple[str, list[Entry]]]
    reward_attrs: list[str]
    reward_specs: list[JsonObject]
    reward_names: list[str]
    reward_occurrences: list[int]
    max_completion_length: int
    vllm_max_model_length: int
    trl_cli_notes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def config(self) -> dict[str, ConfigValue]:
        """grpo_config.yaml as a mapping (what TRL's parser will read)."""
        return {e.key: e.value for _, entries in self.sections for e in entries}


def relative_to_run(path: Path, run_dir: Path) -> str:
    """`path` relative to the run directory (forward slashes), so rendered files hold no absolute paths."""
    return Path(os.path.relpath(path.resolve(), run_dir.resolve())).as_posix()


def topology(brief: Brief, recommend: Mapping[str, object]) -> Topology:
    """Processes and distribution for the brief's hardware, or RenderError when TRL could not run it."""
    hw = brief.hardware
    gpus, nodes, server_gpus = hw.gpus, hw.nodes, hw.server_gpus
    errors: list[Problem] = []
    if gpus == 0:
        if nodes > 1:
            errors.append(Problem("inconsistent_fields", "hardware.nodes",
                                  f"found {nodes} nodes for a CPU run (hardware.gpus 0)",
                                  "set `hardware.nodes: 1`, or give GPUs"))
        if errors:
            raise RenderError(errors)
        return Topology(True, 1, 0, hw.generation, 0, 1, 1, "single", "no")
    if server_gpus and nodes == 1 and server_gpus >= gpus:
        errors.append(Problem(
            "inconsistent_fields", "hardware.vllm_server_gpus",
            f"gives {server_gpus} of {gpus} GPU(s) to the vLLM server, leaving none to train on",
            f"set `hardware.gpus: {server_gpus + 1}` or more, or `hardware.generation: vllm-colocate` on one GPU"))
    elif server_gpus > gpus:
        # As in TRL's multi-node recipe: the first node serves generations, the others train.
        errors.append(Problem("inconsistent_fields", "hardware.vllm_server_gpus",
                              f"found {server_gpus}, more than the {gpus} GPUs of the first node",
                              f"set `hardware.vllm_server_gpus: {gpus}` or less"))
    if errors:
        raise RenderError(errors)
    processes = hw.training_processes
    distributed = str(recommend.get("distributed") or "")
    if processes == 1:
        distributed = "single"
    elif distributed in ("", "single"):
        distributed = "ddp"
    mixed = {"bfloat16": "bf16", "float16": "fp16"}.get(brief.model.dtype, "no")
    return Topology(False, nodes, gpus, hw.generation, server_gpus, hw.training_machines, processes, distributed,
                    mixed)


def _check_batch(brief: Brief, topo: Topology) -> list[Problem]:
    """TRL's own rule (brief.batch), repeated at render time: a generation batch holds whole groups."""
    batch = brief.grpo.generation_batch(topo.train_processes)
    if batch.holds_whole_groups:
        return []
    what = (f"is not a multiple of the global batch {batch.global_batch}" if not batch.divides_global_batch
            else f"is not a multiple of grpo.num_generations {batch.num_generations}")
    return [Problem("generation_batch", "grpo.per_device_train_batch_size",
                    f"the generation batch {batch.formula} completions {what}", "; or ".join(batch.fixes()))]


def _check_overrides(overrides: Mapping[str, JsonValue]) -> list[Problem]:
    known = set(trl_fields()["GRPOConfig"])
    errors = []
    for key in sorted(overrides):
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            fix = f"rename it to `{close[0]}`" if close else "remove it (see TRL 1.16's GRPOConfig for its fields)"
            errors.append(Problem("unknown_override", f"grpo.overrides.{key}",
                                  "is not a field of TRL 1.16's GRPOConfig", fix))
    return errors


def reward_attr(index: int, fn: str) -> str:
    """Module-level name in rewards_entry.py for reward `index` (a Python identifier)."""
    tail = "".join(c if c.isalnum() else "_" for c in fn.rpartition(":")[2] or fn).strip("_") or "reward"
    return f"reward_{index}_{tail}"


def build_plan(brief: Brief, run_dir: Path, recommend: Mapping[str, object] | None = None) -> RunPlan:
    """The run directory's contents for `brief` (a loaded, valid Brief), or RenderError.

    `recommend` is the memory estimate's advice (vLLM memory share, sleep mode, distribution)."""
    grpo = brief.grpo
    recommend = dict(recommend or {})
    topo = topology(brief, recommend)
    overrides = dict(grpo.overrides)
    errors = _check_overrides(overrides) + _check_batch(brief, topo)
    if errors:
        raise RenderError(errors)

    model_ref = _model_ref(brief, run_dir)
    reward_specs = [r.as_mapping() for r in brief.rewards]
    reward_attrs = [reward_attr(i, r.fn) for i, r in enumerate(brief.rewards)]
    max_model_length = grpo.max_prompt_length + grpo.max_completion_length
    compiled = compiled_generation(topo, brief.hardware, brief.model.adapter)
    sections: list[tuple[str, list[Entry]]] = [
        ("Model (TRL ModelConfig)", _model_entries(brief.model, model_ref)),
        ("Data and rewards (TRL GRPOScriptArguments, DatasetMixtureConfig)",
         _data_and_reward_entries(brief, run_dir, reward_attrs)),
        ("Training (TRL GRPOConfig)", _training_entries(brief, topo)),
        (_variant_title(grpo), _variant_entries(grpo.variant)),
        (f"Generation: {topo.generation}", _generation_entries(topo, brief.hardware, recommend, max_model_length,
                                                                compiled)),
    ]
    if brief.episode is not None:
        sections.append(("Episode (tool use; `finetune launch` passes the tools to GRPOTrainer)",
                         [Entry("max_tool_calling_iterations", brief.episode.max_turns, "episode.max_turns")]))
    if overrides:
        sections.append(("grpo.overrides (merged last)", _override_entries(overrides)))
    return RunPlan(
        name=brief.name, brief_sha256=brief.sha256, brief_rel=relative_to_run(brief.path, run_dir),
        brief_folder_rel=relative_to_run(brief.folder, run_dir), model_ref=model_ref,
        model_revision=brief.model.revision, dtype=brief.model.dtype, topology=topo,
        sections=_merge_sections(sections), reward_attrs=reward_attrs, reward_specs=reward_specs,
        reward_names=[r.name for r in brief.rewards], reward_occurrences=[r.occurrence for r in brief.rewards],
        max_completion_length=grpo.max_completion_length, vllm_max_model_length=max_model_length,
        trl_cli_notes=_trl_cli_notes(brief, compiled),
        notes=_install_notes(topo.generation),
    )


def _model_ref(brief: Brief, run_dir: Path) -> str:
    """model.id as the run directory names it: an embedded model or hub id as is, a local folder relative."""
    if brief.model.is_local(brief.folder):
        return relative_to_run(brief.resolve(brief.model.id), run_dir)
    return brief.model.id


def _trl_cli_notes(brief: Brief, compiled: bool) -> list[str]:
    """What `trl grpo --config grpo_config.yaml` does not do that `finetune launch` does."""
    notes = []
    ep = brief.episode
    if ep is not None:
        what = f"the environment {ep.environment}" if ep.environment else "the tools " + ", ".join(ep.tools)
        template = f" and the chat template {ep.chat_template}" if ep.chat_template else ""
        notes.append(
            f"`trl grpo` cannot run this file: it has no flag for tools or environments, so it would train "
            f"single-turn completions without {what}{template}; "
            "`finetune launch` builds GRPOTrainer(tools=... or environment_factory=...) from the brief's episode")
    if compiled:
        notes.append(
            "`finetune launch` compiles decoding from the static cache; `trl grpo` decodes it uncompiled, slower than "
            "its own default: render with `hardware.compiled_generation: false` for `trl grpo`")
    if brief.model.is_embedded or brief.model.gguf_file:
        notes.append(
            "the model is embedded or a GGUF file: `finetune launch` dequantises it first; for `trl grpo` pass "
            "`--model_name_or_path <dequantised dir>` after --config")
    if brief.data.prompt_field != "prompt" or brief.data.system_prompt:
        notes.append(
            "data.prompt_field/system_prompt are applied by `finetune launch`; `trl grpo` reads the `prompt` "
            "column as it is")
    return notes


def _model_entries(model: ModelSpec, model_ref: str) -> list[Entry]:
    """TRL's ModelConfig: read by `trl grpo`; `finetune launch` reads the same fields."""
    adapter = model.adapter
    entries = [
        Entry("model_name_or_path", model_ref, "model.id (local paths relative to this directory)"),
        Entry("model_revision", model.revision or "main", "model.revision"),
        Entry("dtype", model.dtype, "model.dtype (TRL's ModelConfig defaults to float32)"),
        Entry("use_peft", adapter != "full", f"model.adapter {adapter}"),
    ]
    if adapter != "full":
        lora = model.lora
        entries += [
            Entry("lora_r", lora.r, "model.lora.r"),
            Entry("lora_alpha", lora.alpha, "model.lora.alpha"),
            Entry("lora_dropout", float(lora.dropout), "model.lora.dropout (TRL's CLI defaults to 0.05)"),
            Entry("lora_target_modules", lora.target_list, "model.lora.target_modules"),
        ]
    if adapter == "qlora":
        entries += [
            Entry("load_in_4bit", True, "qlora: 4-bit base weights (bitsandbytes)"),
            Entry("bnb_4bit_quant_type", "nf4", "qlora: NF4, as in the QLoRA paper"),
            Entry("use_bnb_nested_quant", True, "qlora: double quantisation"),
        ]
    return entries


def _data_and_reward_entries(brief: Brief, run_dir: Path, reward_attrs: list[str]) -> list[Entry]:
    """TRL's GRPOScriptArguments and DatasetMixtureConfig: the training split and the reward callables."""
    train = brief.data.train
    if data_is_local(train, brief.folder):
        path = brief.resolve(train)
        dataset: dict[str, str] = {"path": DATA_BUILDERS.get(path.suffix.lower(), "json"),
                                   "data_files": relative_to_run(path, run_dir), "split": "train"}
    else:
        dataset = {"path": train, "split": brief.data.split}
    return [
        Entry("datasets", [dataset], "data.train"),
        Entry("reward_funcs", [f"rewards_entry.{a}" for a in reward_attrs], "rewards[*].fn, built in rewards_entry.py"),
    ]


def _training_entries(brief: Brief, topo: Topology) -> list[Entry]:
    """GRPOConfig from the brief's own values (the variant, generation and overrides come after)."""
    grpo, dtype = brief.grpo, brief.model.dtype
    schedule = Schedule.of_spec(grpo)
    cpu_run = " (CPU run)" if topo.cpu else ""
    return [
        Entry("output_dir", "checkpoints", "checkpoints/checkpoint-<step>/ in this directory"),
        Entry("seed", grpo.seed, "grpo.seed"),
        Entry("max_steps", grpo.max_steps, "grpo.max_steps"),
        Entry("learning_rate", grpo.learning_rate, "grpo.learning_rate (TRL 1.16 defaults to 1e-6)"),
        Entry("lr_scheduler_type", schedule.trl_type,
              f"grpo.lr_scheduler {schedule.name} (TRL 1.16 defaults to linear decay to 0)"),
        Entry("warmup_steps", schedule.warmup_steps,
              f"grpo.warmup_ratio {float(grpo.warmup_ratio):g} of max_steps, rounded up"),
        Entry("beta", grpo.beta, "grpo.beta (TRL 1.16 defaults to 0.0)"),
        Entry("num_generations", grpo.num_generations, "grpo.num_generations"),
        Entry("per_device_train_batch_size", grpo.per_device_train_batch_size, "grpo.per_device_train_batch_size"),
        Entry("gradient_accumulation_steps", grpo.gradient_accumulation_steps, "grpo.gradient_accumulation_steps"),
        Entry("steps_per_generation", grpo.steps_per_generation,
              "4 x gradient_accumulation_steps for gspo" if grpo.variant == "gspo"
              else "= gradient_accumulation_steps"),
        Entry("max_completion_length", grpo.max_completion_length, "grpo.max_completion_length"),
        Entry("temperature", grpo.temperature, "grpo.temperature"),
        Entry("chat_template_kwargs", dict(brief.data.chat_template_kwargs),
              "data.chat_template_kwargs (the prompt format baseline and inspect sampled with)"),
        Entry("gradient_checkpointing", grpo.gradient_checkpointing, "grpo.gradient_checkpointing"),
        Entry("bf16", (not topo.cpu) and dtype == "bfloat16", "model.dtype" + cpu_run),
        Entry("fp16", (not topo.cpu) and dtype == "float16", "model.dtype" + cpu_run),
        Entry("use_cpu", topo.cpu, "hardware.gpus 0" if topo.cpu else "hardware.gpus"),
        Entry("model_init_kwargs", {"dtype": dtype}, "TRL 1.16 loads a model path in float32 without it"),
        Entry("reward_weights", [float(r.weight) for r in brief.rewards], "rewards[*].weight"),
        Entry("remove_unused_columns", False, "rewards read the dataset's columns"),
        Entry("logging_steps", grpo.logging_steps, "grpo.logging_steps"),
        Entry("save_strategy", "steps", "checkpoints every save_steps"),
        Entry("save_steps", grpo.save_steps, "grpo.save_steps"),
        Entry("save_only_model", False, "optimizer and RNG state kept so --resume continues exactly"),
        *(Entry(k, v, why) for k, v, why in tracking_entries(brief.tracking, brief.name)),
        Entry("log_completions", False, "finetune launch writes completions.jsonl itself; no console tables"),
    ]


def _variant_title(grpo: GrpoSpec) -> str:
    return f"GRPO variant: {grpo.variant}" + (f" (symptom: {grpo.symptom})" if grpo.symptom else "")


def _variant_entries(variant: str) -> list[Entry]:
    """The variant's GRPOConfig values (brief.variants), each with the variant's reason."""
    return [Entry(key, value, f"variant {variant}: {why}") for key, value, why in VARIANT_SETTINGS[variant]]


def _vllm_memory_share(hardware: HardwareSpec, recommend: Mapping[str, object]) -> tuple[float, str]:
    """vllm_gpu_memory_utilization and why: the brief's, else the memory estimate's advice, else TRL's default."""
    if hardware.vllm_gpu_memory_utilization is not None:
        return hardware.vllm_gpu_memory_utilization, "hardware.vllm_gpu_memory_utilization"
    advised = recommend.get("vllm_gpu_memory_utilization")
    if isinstance(advised, (int, float)):
        return float(advised), "the memory estimate's advice"
    return DEFAULT_VLLM_GPU_MEMORY_UTILIZATION, "TRL's default (no memory estimate available)"


def _generation_entries(topo: Topology, hardware: HardwareSpec, recommend: Mapping[str, object],
                        max_model_length: int, compiled: bool) -> list[Entry]:
    """How completions are generated: vLLM beside the trainer, a vLLM server, or transformers' generate."""
    if topo.generation == "vllm-colocate":
        share, share_why = _vllm_memory_share(hardware, recommend)
        return [
            Entry("use_vllm", True, "hardware.generation vllm-colocate"),
            Entry("vllm_mode", "colocate", "vLLM shares the training GPU"),
            Entry("vllm_gpu_memory_utilization", share, share_why),
            Entry("vllm_enable_sleep_mode", bool(recommend.get("vllm_enable_sleep_mode", False)),
                  "the memory estimate's advice" if "vllm_enable_sleep_mode" in recommend else "off unless advised"),
            Entry("vllm_tensor_parallel_size", 1, "one engine per training process"),
            Entry("vllm_max_model_length", max_model_length, "grpo.max_prompt_length + grpo.max_completion_length"),
        ]
    if topo.generation == "vllm-server":
        return [
            Entry("use_vllm", True, "hardware.generation vllm-server"),
            Entry("vllm_mode", "server", "generations come from `trl vllm-serve` (started by launch.sh)"),
            Entry("vllm_server_host", "127.0.0.1",
                  "launch.sh's server" if topo.nodes == 1 else "replaced by the first node's address in sbatch.sh"),
            Entry("vllm_server_port", VLLM_SERVER_PORT, "launch.sh starts the server on this port"),
            Entry("vllm_server_timeout", 600.0, "seconds to wait for the server"),
        ]
    entries = [Entry("use_vllm", False, "hardware.generation transformers: model.generate")]
    if compiled:
        entries.append(Entry(
            "cache_implementation", "static",
            "hardware.compiled_generation: a static KV cache, whose decoding `finetune launch` compiles into CUDA "
            "graphs (`trl grpo` with this file decodes from it uncompiled)"))
    return entries


# Adapters whose compiled decoding was measured faster than eager on one H200 (bench/step_profile.py).
COMPILED_ADAPTERS = ("full", "lora")


def compiled_generation(topo: Topology, hardware: HardwareSpec, adapter: str) -> bool:
    """Decode from a compiled static KV cache: full fine-tuning or LoRA with transformers generation on one GPU,
    unless the brief says no (docs/results.md, "Where a step's time goes": LoRA's step 2.4x faster compiled).
    Where it was not measured faster it stays off: several processes (DDP, FSDP, ZeRO-3), QLoRA and CPU runs."""
    return (topo.generation == "transformers" and not topo.cpu and topo.distributed == "single"
            and adapter in COMPILED_ADAPTERS and hardware.compiled_generation)


def _override_entries(overrides: Mapping[str, JsonValue]) -> list[Entry]:
    """grpo.overrides, merged last. A generation_batch_size override clears steps_per_generation (TRL takes
    one or the other): the None entry removes the rendered value and is dropped by `_merge_sections`."""
    overrides = dict(overrides)
    if "generation_batch_size" in overrides:
        overrides.setdefault("steps_per_generation", None)
    return [Entry(key, overrides[key], "grpo.overrides") for key in sorted(overrides)]


def _merge_sections(sections: list[tuple[str, list[Entry]]]) -> list[tuple[str, list[Entry]]]:
    """Later sections win: a key set by a later section leaves the earlier ones, so each key appears once."""
    seen: set[str] = set()
    merged: list[tuple[str, list[Entry]]] = []
    for title, entries in reversed(sections):
        merged.append((title, [e for e in entries if e.key not in seen]))
        seen.update(e.key for e in entries)
    merged.reverse()
    return [(title, [e for e in entries if not (e.key == "steps_per_generation" and e.value is None)])
            for title, entries in merged]


def _install_notes(generation: str) -> list[str]:
    if generation == "transformers":
        return []
    return [f"vLLM generation ({generation}) needs `pip install 'llm-finetuning[vllm]'` (trl[vllm]==1.16.0)"]
