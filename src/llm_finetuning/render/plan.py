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
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from llm_finetuning.brief.schedule import Schedule
from llm_finetuning.brief.tracking import tracking_entries
from llm_finetuning.brief.variants import VARIANT_SETTINGS
from llm_finetuning.errors import BriefError
from llm_finetuning.rewards.registry import reward_names, reward_occurrences

# TRL 1.16 GRPOConfig defaults the recipe disagrees with (loss_type dapo, beta 0.0, learning_rate 1e-6,
# float32 model loading): every value the brief decides is written explicitly.
DEFAULT_VLLM_GPU_MEMORY_UTILIZATION = 0.3
VLLM_SERVER_PORT = 8000
VLLM_SERVER_GPU_MEMORY_UTILIZATION = 0.9
MAIN_PROCESS_PORT = 29500
LOCAL_DATA_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
EMBEDDED_PREFIX = "embedded:"

class RenderError(Exception):
    """The brief cannot be rendered into a run TRL accepts; carries every BriefError found."""

    def __init__(self, errors: list[BriefError]) -> None:
        super().__init__("; ".join(e.line() for e in errors))
        self.errors = errors


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
    value: Any
    why: str = ""


@dataclass
class Topology:
    """Where the processes go: CPU, one GPU, DDP/ZeRO/FSDP on several, a vLLM server on its own GPUs."""

    cpu: bool
    nodes: int
    gpus_per_node: int
    generation: str
    server_gpus: int  # GPUs given to `trl vllm-serve` (0 without a server)
    train_machines: int
    train_processes: int  # accelerate's num_processes (all training machines together)
    distributed: str  # single | ddp | zero2 | zero3 | fsdp2
    mixed_precision: str  # no | bf16 | fp16

    @property
    def processes_per_machine(self) -> int:
        return self.train_processes // max(self.train_machines, 1)

    @property
    def server_shares_node(self) -> bool:
        """vLLM server and trainers on the same (single) node, each on their own GPUs."""
        return self.server_gpus > 0 and self.nodes == 1

    @property
    def train_gpu_ids(self) -> str:
        """CUDA_VISIBLE_DEVICES for the trainers on a node that also runs the server, else empty."""
        if not self.server_shares_node:
            return ""
        return ",".join(str(i) for i in range(self.server_gpus, self.gpus_per_node))

    @property
    def server_gpu_ids(self) -> str:
        return ",".join(str(i) for i in range(self.server_gpus))

    @property
    def in_process(self) -> bool:
        """One training process and no server: `finetune launch` trains in its own process."""
        return self.train_processes == 1 and self.server_gpus == 0 and self.nodes == 1

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu": self.cpu, "nodes": self.nodes, "gpus_per_node": self.gpus_per_node,
            "generation": self.generation, "server_gpus": self.server_gpus,
            "train_machines": self.train_machines, "train_processes": self.train_processes,
            "distributed": self.distributed, "mixed_precision": self.mixed_precision,
        }


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
    reward_specs: list[dict[str, Any]]
    reward_names: list[str]
    reward_occurrences: list[int]
    max_completion_length: int
    vllm_max_model_length: int
    trl_cli_notes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def config(self) -> dict[str, Any]:
        """grpo_config.yaml as a mapping (what TRL's parser will read)."""
        return {e.key: e.value for _, entries in self.sections for e in entries}


def relative_to_run(path: Path, run_dir: Path) -> str:
    """`path` relative to the run directory (forward slashes), so rendered files hold no absolute paths."""
    return Path(os.path.relpath(path.resolve(), run_dir.resolve())).as_posix()


def _is_local_model(model_id: str, folder: Path) -> bool:
    return model_id.startswith((".", "/", "~")) or (folder / model_id).exists()


def _looks_local_data(ref: str) -> bool:
    return ref.endswith(tuple(LOCAL_DATA_BUILDERS)) or ref.startswith((".", "/", "~")) or ref.count("/") != 1


def topology(data: dict[str, Any], recommend: dict[str, Any]) -> Topology:
    """Processes and distribution for the brief's hardware, or RenderError when TRL could not run it."""
    hw = data["hardware"]
    gpus, nodes, generation = int(hw["gpus"]), int(hw["nodes"]), str(hw["generation"])
    dtype = data["model"]["dtype"]
    errors: list[BriefError] = []
    if gpus == 0:
        if nodes > 1:
            errors.append(BriefError("hardware.nodes", f"found {nodes} nodes for a CPU run (hardware.gpus 0)",
                                     "set `hardware.nodes: 1`, or give GPUs"))
        if errors:
            raise RenderError(errors)
        return Topology(True, 1, 0, generation, 0, 1, 1, "single", "no")
    server_gpus = int(hw["vllm_server_gpus"]) if generation == "vllm-server" else 0
    if server_gpus and nodes == 1:
        if server_gpus >= gpus:
            errors.append(BriefError(
                "hardware.vllm_server_gpus",
                f"gives {server_gpus} of {gpus} GPU(s) to the vLLM server, leaving none to train on",
                f"set `hardware.gpus: {server_gpus + 1}` or more, or `hardware.generation: vllm-colocate` on one GPU"))
        machines, processes = 1, gpus - server_gpus
    elif server_gpus:
        # As in TRL's multi-node recipe: the first node serves generations, the others train.
        if server_gpus > gpus:
            errors.append(BriefError("hardware.vllm_server_gpus", f"found {server_gpus}, more than the {gpus} "
                                     "GPUs of the first node", f"set `hardware.vllm_server_gpus: {gpus}` or less"))
        machines, processes = nodes - 1, (nodes - 1) * gpus
    else:
        machines, processes = nodes, nodes * gpus
    if errors:
        raise RenderError(errors)
    distributed = str(recommend.get("distributed") or "")
    if processes == 1:
        distributed = "single"
    elif distributed in ("", "single"):
        distributed = "ddp"
    mixed = {"bfloat16": "bf16", "float16": "fp16"}.get(dtype, "no")
    return Topology(False, nodes, gpus, generation, server_gpus, machines, processes, distributed, mixed)


def _check_batch(data: dict[str, Any], topo: Topology, steps_per_generation: int) -> list[BriefError]:
    """TRL's own rule, repeated at render time: a generation batch holds whole groups."""
    g = data["grpo"]
    batch = g["per_device_train_batch_size"] * topo.train_processes * steps_per_generation
    num_generations = g["num_generations"]
    if batch % num_generations == 0:
        return []
    per_device = g["per_device_train_batch_size"]
    fix = per_device
    while (fix * topo.train_processes * steps_per_generation) % num_generations:
        fix += 1
    return [BriefError(
        "grpo.per_device_train_batch_size",
        f"the generation batch {per_device} x {topo.train_processes} process(es) x {steps_per_generation} "
        f"step(s) = {batch} completions is not a multiple of grpo.num_generations {num_generations}",
        f"set `grpo.per_device_train_batch_size: {fix}`")]


def _check_overrides(overrides: dict[str, Any]) -> list[BriefError]:
    known = set(trl_fields()["GRPOConfig"])
    errors = []
    for key in sorted(overrides):
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            fix = f"rename it to `{close[0]}`" if close else "remove it (see TRL 1.16's GRPOConfig for its fields)"
            errors.append(BriefError(f"grpo.overrides.{key}", "is not a field of TRL 1.16's GRPOConfig", fix))
    return errors


def reward_attr(index: int, fn: str) -> str:
    """Module-level name in rewards_entry.py for reward `index` (a Python identifier)."""
    tail = "".join(c if c.isalnum() else "_" for c in fn.rpartition(":")[2] or fn).strip("_") or "reward"
    return f"reward_{index}_{tail}"


def build_plan(brief: Any, run_dir: Path, recommend: dict[str, Any] | None = None) -> RunPlan:
    """The run directory's contents for `brief` (a loaded, valid Brief), or RenderError."""
    data = brief.data
    folder: Path = brief.folder
    recommend = dict(recommend or {})
    topo = topology(data, recommend)
    g, hw, model, dsec = data["grpo"], data["hardware"], data["model"], data["data"]
    errors: list[BriefError] = []
    overrides = dict(g.get("overrides") or {})
    errors += _check_overrides(overrides)
    variant = g["variant"]

    steps_per_generation = g["gradient_accumulation_steps"]
    if variant == "gspo":
        # GSPO's sequence ratio only matters off-policy: 4 optimizer steps per generation (paper v2, 5.1).
        steps_per_generation = 4 * g["gradient_accumulation_steps"]
    if "steps_per_generation" in overrides:
        steps_per_generation = int(overrides["steps_per_generation"])
    if "generation_batch_size" not in overrides:
        errors += _check_batch(data, topo, steps_per_generation)
    if errors:
        raise RenderError(errors)

    # Model (TRL ModelConfig): read by `trl grpo`; `finetune launch` reads the same fields.
    mid = str(model["id"])
    if mid.startswith(EMBEDDED_PREFIX):
        model_ref = mid
    elif _is_local_model(mid, folder):
        model_ref = relative_to_run(brief.resolve(mid), run_dir)
    else:
        model_ref = mid
    trl_cli_notes: list[str] = []
    if mid.startswith(EMBEDDED_PREFIX) or model.get("gguf_file"):
        trl_cli_notes.append(
            "the model is embedded or a GGUF file: `finetune launch` dequantises it first; for `trl grpo` pass "
            "`--model_name_or_path <dequantised dir>` after --config")
    if dsec["prompt_field"] != "prompt" or dsec.get("system_prompt"):
        trl_cli_notes.append(
            "data.prompt_field/system_prompt are applied by `finetune launch`; `trl grpo` reads the `prompt` "
            "column as it is")
    dtype = model["dtype"]
    adapter = model["adapter"]
    lora = model.get("lora") or {}
    model_entries = [
        Entry("model_name_or_path", model_ref, "model.id (local paths relative to this directory)"),
        Entry("model_revision", model.get("revision") or "main", "model.revision"),
        Entry("dtype", dtype, "model.dtype (TRL's ModelConfig defaults to float32)"),
        Entry("use_peft", adapter != "full", f"model.adapter {adapter}"),
    ]
    if adapter != "full":
        targets = lora.get("target_modules", "all-linear")
        model_entries += [
            Entry("lora_r", lora.get("r", 16), "model.lora.r"),
            Entry("lora_alpha", lora.get("alpha", 32), "model.lora.alpha"),
            Entry("lora_dropout", float(lora.get("dropout", 0.0)), "model.lora.dropout (TRL's CLI defaults to 0.05)"),
            Entry("lora_target_modules", [targets] if isinstance(targets, str) else list(targets),
                  "model.lora.target_modules"),
        ]
    if adapter == "qlora":
        model_entries += [
            Entry("load_in_4bit", True, "qlora: 4-bit base weights (bitsandbytes)"),
            Entry("bnb_4bit_quant_type", "nf4", "qlora: NF4, as in the QLoRA paper"),
            Entry("use_bnb_nested_quant", True, "qlora: double quantisation"),
        ]

    # Data and rewards (TRL GRPOScriptArguments and DatasetMixtureConfig).
    train = str(dsec["train"])
    if _looks_local_data(train):
        path = brief.resolve(train)
        dataset = {"path": LOCAL_DATA_BUILDERS.get(path.suffix, "json"), "data_files": relative_to_run(path, run_dir),
                   "split": "train"}
    else:
        dataset = {"path": train, "split": dsec.get("split", "train")}
    specs = [dict(r) for r in data["rewards"]]
    attrs = [reward_attr(i, str(r["fn"])) for i, r in enumerate(specs)]
    names, occurrences = reward_names(specs), reward_occurrences(specs)
    data_entries = [
        Entry("datasets", [dataset], "data.train"),
        Entry("reward_funcs", [f"rewards_entry.{a}" for a in attrs], "rewards[*].fn, built in rewards_entry.py"),
    ]

    # GRPOConfig: the brief's values, then the variant's, then generation, then overrides.
    max_model_len = int(g["max_prompt_length"]) + int(g["max_completion_length"])
    schedule = Schedule.of(g)
    train_entries = [
        Entry("output_dir", "checkpoints", "checkpoints/checkpoint-<step>/ in this directory"),
        Entry("seed", g["seed"], "grpo.seed"),
        Entry("max_steps", g["max_steps"], "grpo.max_steps"),
        Entry("learning_rate", g["learning_rate"], "grpo.learning_rate (TRL 1.16 defaults to 1e-6)"),
        Entry("lr_scheduler_type", schedule.trl_type,
              f"grpo.lr_scheduler {schedule.name} (TRL 1.16 defaults to linear decay to 0)"),
        Entry("warmup_steps", schedule.warmup_steps, f"grpo.warmup_ratio {float(g['warmup_ratio']):g} of max_steps, rounded up"),
        Entry("beta", g["beta"], "grpo.beta (TRL 1.16 defaults to 0.0)"),
        Entry("num_generations", g["num_generations"], "grpo.num_generations"),
        Entry("per_device_train_batch_size", g["per_device_train_batch_size"], "grpo.per_device_train_batch_size"),
        Entry("gradient_accumulation_steps", g["gradient_accumulation_steps"], "grpo.gradient_accumulation_steps"),
        Entry("steps_per_generation", steps_per_generation,
              "4 x gradient_accumulation_steps for gspo" if variant == "gspo" else "= gradient_accumulation_steps"),
        Entry("max_completion_length", g["max_completion_length"], "grpo.max_completion_length"),
        Entry("temperature", g["temperature"], "grpo.temperature"),
        Entry("chat_template_kwargs", dict(dsec.get("chat_template_kwargs") or {}),
              "data.chat_template_kwargs (the prompt format baseline and inspect sampled with)"),
        Entry("gradient_checkpointing", g["gradient_checkpointing"], "grpo.gradient_checkpointing"),
        Entry("bf16", (not topo.cpu) and dtype == "bfloat16", "model.dtype" + (" (CPU run)" if topo.cpu else "")),
        Entry("fp16", (not topo.cpu) and dtype == "float16", "model.dtype" + (" (CPU run)" if topo.cpu else "")),
        Entry("use_cpu", topo.cpu, "hardware.gpus 0" if topo.cpu else "hardware.gpus"),
        Entry("model_init_kwargs", {"dtype": dtype}, "TRL 1.16 loads a model path in float32 without it"),
        Entry("reward_weights", [float(r["weight"]) for r in specs], "rewards[*].weight"),
        Entry("remove_unused_columns", False, "rewards read the dataset's columns"),
        Entry("logging_steps", g["logging_steps"], "grpo.logging_steps"),
        Entry("save_strategy", "steps", "checkpoints every save_steps"),
        Entry("save_steps", g["save_steps"], "grpo.save_steps"),
        Entry("save_only_model", False, "optimizer and RNG state kept so --resume continues exactly"),
        *(Entry(k, v, why) for k, v, why in tracking_entries(data.get("tracking") or {}, str(data["name"]))),
        Entry("log_completions", False, "finetune launch writes completions.jsonl itself; no console tables"),
    ]
    variant_entries = [Entry(k, v, f"variant {variant}: {why}") for k, v, why in VARIANT_SETTINGS[variant]]

    rec_util = recommend.get("vllm_gpu_memory_utilization")
    util = hw.get("vllm_gpu_memory_utilization")
    util_why = "hardware.vllm_gpu_memory_utilization"
    if util is None and rec_util is not None:
        util, util_why = float(rec_util), "the memory estimate's advice"
    elif util is None:
        util, util_why = DEFAULT_VLLM_GPU_MEMORY_UTILIZATION, "TRL's default (no memory estimate available)"
    sleep = bool(recommend.get("vllm_enable_sleep_mode", False))
    gen = topo.generation
    if gen == "vllm-colocate":
        gen_entries = [
            Entry("use_vllm", True, "hardware.generation vllm-colocate"),
            Entry("vllm_mode", "colocate", "vLLM shares the training GPU"),
            Entry("vllm_gpu_memory_utilization", util, util_why),
            Entry("vllm_enable_sleep_mode", sleep,
                  "the memory estimate's advice" if "vllm_enable_sleep_mode" in recommend else "off unless advised"),
            Entry("vllm_tensor_parallel_size", 1, "one engine per training process"),
            Entry("vllm_max_model_length", max_model_len, "grpo.max_prompt_length + grpo.max_completion_length"),
        ]
    elif gen == "vllm-server":
        gen_entries = [
            Entry("use_vllm", True, "hardware.generation vllm-server"),
            Entry("vllm_mode", "server", "generations come from `trl vllm-serve` (started by launch.sh)"),
            Entry("vllm_server_host", "127.0.0.1",
                  "launch.sh's server" if topo.nodes == 1 else "replaced by the first node's address in sbatch.sh"),
            Entry("vllm_server_port", VLLM_SERVER_PORT, "launch.sh starts the server on this port"),
            Entry("vllm_server_timeout", 600.0, "seconds to wait for the server"),
        ]
    else:
        gen_entries = [Entry("use_vllm", False, "hardware.generation transformers: model.generate")]

    sections: list[tuple[str, list[Entry]]] = [
        ("Model (TRL ModelConfig)", model_entries),
        ("Data and rewards (TRL GRPOScriptArguments, DatasetMixtureConfig)", data_entries),
        ("Training (TRL GRPOConfig)", train_entries),
        (f"GRPO variant: {variant}" + (f" (symptom: {g['symptom']})" if g.get("symptom") else ""), variant_entries),
        (f"Generation: {gen}", gen_entries),
    ]
    # Later blocks win: drop a key from earlier blocks when a later one sets it, so each key appears once.
    if overrides:
        if "generation_batch_size" in overrides:
            overrides.setdefault("steps_per_generation", None)
        sections.append(("grpo.overrides (merged last)",
                         [Entry(k, overrides[k], "grpo.overrides") for k in sorted(overrides)]))
    seen: set[str] = set()
    deduped: list[tuple[str, list[Entry]]] = []
    for title, entries in reversed(sections):
        kept = [e for e in entries if e.key not in seen]
        seen.update(e.key for e in entries)
        deduped.append((title, kept))
    deduped.reverse()
    # generation_batch_size and steps_per_generation exclude each other in TRL: keep the override.
    final = [(t, [e for e in es if not (e.key == "steps_per_generation" and e.value is None)]) for t, es in deduped]

    notes = []
    if gen != "transformers":
        notes.append(f"vLLM generation ({gen}) needs `pip install 'llm-finetuning[vllm]'` (trl[vllm]==1.16.0)")
    return RunPlan(
        name=brief.name, brief_sha256=brief.sha256, brief_rel=relative_to_run(brief.path, run_dir),
        brief_folder_rel=relative_to_run(folder, run_dir), model_ref=model_ref, model_revision=model.get("revision"),
        dtype=dtype, topology=topo, sections=final, reward_attrs=attrs, reward_specs=specs,
        reward_names=names, reward_occurrences=occurrences, max_completion_length=int(g["max_completion_length"]),
        vllm_max_model_length=max_model_len, trl_cli_notes=trl_cli_notes, notes=notes,
    )
