"""The brief's sections as frozen values, built once by `load_brief` from the validated, defaulted mapping.

Each class mirrors one object of brief.schema.json, field for field (references/brief-fields.md, generated
from the schema, describes them). Values are taken as the schema validated them, not converted: a
`weight: 1` stays the int 1, so a spec hashed or rendered from these values is byte for byte the one the
mapping gave. Lists become tuples, and free-form objects (`rewards[*].args`, `grpo.overrides`,
`data.chat_template_kwargs`) read-only mappings.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from llm_finetuning import reward_registry as registry
from llm_finetuning.brief.batch import GenerationBatch
from llm_finetuning.models import EMBEDDED_PREFIX, PATH_LIKE, model_is_local

# The schema's enums (a test holds each to its `enum`)
Modality = Literal["text", "vision"]
Architecture = Literal["auto", "dense", "moe"]
Dtype = Literal["bfloat16", "float16", "float32"]
Adapter = Literal["full", "lora", "qlora"]
Variant = Literal["grpo", "dapo", "dr_grpo", "gspo"]
Symptom = Literal["entropy_collapse", "length_reward_correlation", "moe"]
LrScheduler = Literal["constant", "cosine", "linear"]
Generation = Literal["vllm-colocate", "vllm-server", "transformers"]
# The file formats a local data split may have, and the `datasets` builder that reads each.
DATA_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
DATA_SUFFIXES = tuple(DATA_BUILDERS)


def data_is_local(ref: str, folder: Path) -> bool:
    """The one rule for `data.train` and `data.eval`: a path-like reference, a data file's suffix, or a name
    that exists next to the brief is a local file; anything else is a hub dataset id."""
    if ref.startswith(PATH_LIKE) or ref.lower().endswith(DATA_SUFFIXES):
        return True
    try:
        return (folder / ref).exists()
    except (OSError, ValueError):  # an impossible name (too long, NUL byte) names nothing
        return False


class FrozenMapping(Mapping[str, Any]):
    """A read-only copy of a free-form object of the brief. Unlike `types.MappingProxyType` it pickles and
    deep-copies, so a Brief does too; it equals a dict with the same items."""

    __slots__ = ("_items",)

    def __init__(self, value: Mapping[str, Any] | None = None) -> None:
        self._items: dict[str, Any] = copy.deepcopy(dict(value or {}))

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"FrozenMapping({self._items!r})"


@dataclass(frozen=True)
class TaskSpec:
    """`task`: what the model should learn."""

    summary: str
    modality: Modality = "text"

    @classmethod
    def of(cls, section: dict[str, Any]) -> TaskSpec:
        return cls(section["summary"], section["modality"])


@dataclass(frozen=True)
class LoraSpec:
    """`model.lora`: the adapter's settings (read with `model.adapter` lora or qlora). Its defaults are the
    schema's, and nowhere else (`LoraSpec.default()`)."""

    r: int
    alpha: int
    dropout: float
    target_modules: str | tuple[str, ...]

    @classmethod
    def of(cls, section: dict[str, Any]) -> LoraSpec:
        targets = section["target_modules"]
        return cls(section["r"], section["alpha"], section["dropout"],
                   targets if isinstance(targets, str) else tuple(targets))

    @classmethod
    def default(cls) -> LoraSpec:
        """The schema's `model.lora` defaults."""
        from llm_finetuning.brief.defaults import apply_defaults, schema

        return cls.of(apply_defaults({}, schema()["properties"]["model"]["properties"]["lora"]))

    @property
    def target_list(self) -> list[str]:
        """`target_modules` as the list TRL's ModelConfig takes (`all-linear` is a one-item list)."""
        return [self.target_modules] if isinstance(self.target_modules, str) else list(self.target_modules)


@dataclass(frozen=True)
class ModelSpec:
    """`model`: the policy. Satisfies `models.ModelRef`, so it resolves as it is."""

    id: str
    revision: str | None = None
    gguf_file: str | None = None
    architecture: Architecture = "auto"
    dtype: Dtype = "bfloat16"
    adapter: Adapter = "full"
    lora: LoraSpec = field(default_factory=LoraSpec.default)

    @classmethod
    def of(cls, section: dict[str, Any]) -> ModelSpec:
        return cls(section["id"], section["revision"], section["gguf_file"], section["architecture"],
                   section["dtype"], section["adapter"], LoraSpec.of(section["lora"]))

    @property
    def is_embedded(self) -> bool:
        """`model.id` names a model shipped in a package (`embedded:...`)."""
        return self.id.startswith(EMBEDDED_PREFIX)

    def is_local(self, folder: Path) -> bool:
        """`model.id` names a folder (relative to the brief's `folder`), not a hub id or an embedded model."""
        return model_is_local(self.id, folder)


@dataclass(frozen=True)
class DataSpec:
    """`data`: the prompts."""

    train: str
    eval: str | None
    split: str
    prompt_field: str
    system_prompt: str | None
    chat_template_kwargs: Mapping[str, Any]

    @classmethod
    def of(cls, section: dict[str, Any]) -> DataSpec:
        return cls(section["train"], section["eval"], section["split"], section["prompt_field"],
                   section["system_prompt"], FrozenMapping(section["chat_template_kwargs"]))

    def eval_is_split(self, folder: Path) -> bool:
        """`data.eval` names another split of the hub dataset `data.train` (e.g. `test`), not data of its own."""
        return (bool(self.eval) and "/" not in str(self.eval) and not data_is_local(str(self.eval), folder)
                and not data_is_local(self.train, folder))


@dataclass(frozen=True)
class RewardSpec:
    """One entry of `rewards`, with the metric name TRL logs it under (`fn`, or `fn#2` where `fn` repeats)."""

    fn: str
    weight: float
    args: Mapping[str, Any]
    name: str
    occurrence: int  # 1 for the first reward with this fn, 2 for the second, ...

    @property
    def is_judge(self) -> bool:
        return self.fn == "judge"

    def as_mapping(self) -> dict[str, Any]:
        """The entry as the defaulted brief holds it: what `rewards.build_reward` takes and records hash."""
        return {"fn": self.fn, "weight": self.weight, "args": copy.deepcopy(dict(self.args))}


def reward_specs(entries: list[dict[str, Any]]) -> tuple[RewardSpec, ...]:
    """The defaulted `rewards` list as specs, named as `reward_registry.reward_names` names them."""
    names, occurrences = registry.reward_names(entries), registry.reward_occurrences(entries)
    return tuple(RewardSpec(e["fn"], e["weight"], FrozenMapping(e["args"]), name, k)
                 for e, name, k in zip(entries, names, occurrences, strict=True))


@dataclass(frozen=True)
class GrpoSpec:
    """`grpo`: the GRPO settings. `overrides` are further GRPOConfig kwargs, merged last by the renderer."""

    variant: Variant
    symptom: Symptom | None
    num_generations: int
    learning_rate: float
    lr_scheduler: LrScheduler
    warmup_ratio: float
    beta: float
    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    max_prompt_length: int
    max_completion_length: int
    temperature: float
    max_steps: int
    gradient_checkpointing: bool
    logging_steps: int
    save_steps: int
    seed: int
    deviation: str | None
    overrides: Mapping[str, Any]

    @classmethod
    def of(cls, section: dict[str, Any]) -> GrpoSpec:
        return cls(**{**section, "overrides": FrozenMapping(section["overrides"])})

    @property
    def steps_per_generation(self) -> int | None:
        """Optimizer steps per generation batch: the override, else one accumulation cycle (four for GSPO,
        whose sequence ratio only matters off-policy: paper v2, 5.1); None when `generation_batch_size` is
        overridden instead (TRL takes one or the other)."""
        if "steps_per_generation" in self.overrides:
            return int(self.overrides["steps_per_generation"])
        if "generation_batch_size" in self.overrides:
            return None
        return self.gradient_accumulation_steps * (4 if self.variant == "gspo" else 1)

    def generation_batch(self, processes: int) -> GenerationBatch:
        """The completions generated at once with `processes` training processes, held to TRL's rule."""
        size = self.overrides.get("generation_batch_size")
        return GenerationBatch(self.per_device_train_batch_size, processes, self.steps_per_generation,
                               self.num_generations, self.gradient_accumulation_steps,
                               "steps_per_generation" in self.overrides, None if size is None else int(size))


@dataclass(frozen=True)
class HardwareSpec:
    """`hardware`: where the run trains and how it generates."""

    gpus: int
    nodes: int
    gpu_memory_gib: float
    generation: Generation
    vllm_server_gpus: int
    vllm_gpu_memory_utilization: float | None
    compiled_generation: bool

    @classmethod
    def of(cls, section: dict[str, Any]) -> HardwareSpec:
        return cls(**section)

    @property
    def server_gpus(self) -> int:
        """GPUs given to `trl vllm-serve` (0 without a server, and on CPU)."""
        return self.vllm_server_gpus if self.generation == "vllm-server" and self.gpus else 0

    @property
    def training_machines(self) -> int:
        """Machines that train: all of them, except the first node that serves a multi-node vLLM server."""
        if self.gpus == 0:
            return 1
        return self.nodes - 1 if self.server_gpus and self.nodes > 1 else self.nodes

    @property
    def training_processes(self) -> int:
        """Processes that train (accelerate's num_processes): on one node the GPUs not given to the vLLM server;
        on several nodes in vllm-server mode the first node serves and the others train (accelerate needs the
        same process count on every node); 1 on CPU. May be 0 or less on a brief the renderer refuses."""
        if self.gpus == 0:
            return 1
        if self.server_gpus and self.nodes == 1:
            return self.gpus - self.server_gpus
        return self.training_machines * self.gpus


@dataclass(frozen=True)
class RecordsSpec:
    """`records`: the evidence files, relative to the brief's folder."""

    baseline: str
    inspection: str
    judge_calibration: str

    @classmethod
    def of(cls, section: dict[str, Any]) -> RecordsSpec:
        return cls(**section)

    def paths(self) -> tuple[str, ...]:
        """Every record path, in schema order."""
        return self.baseline, self.inspection, self.judge_calibration


@dataclass(frozen=True)
class ProtectionSpec:
    """`protection`: whether the gate requires `finetune protect` inside Claude Code."""

    required: bool
    reason: str | None

    @classmethod
    def of(cls, section: dict[str, Any]) -> ProtectionSpec:
        return cls(**section)


@dataclass(frozen=True)
class HeldOutEvalSpec:
    """`held_out_eval`: evaluation during training (`every_steps` 0: off)."""

    every_steps: int
    prompts: int
    k: int

    @classmethod
    def of(cls, section: dict[str, Any]) -> HeldOutEvalSpec:
        return cls(**section)


@dataclass(frozen=True)
class TrackingSpec:
    """`tracking`: the experiment trackers besides metrics.jsonl."""

    report_to: tuple[str, ...]
    run_name: str | None
    project: str | None

    @classmethod
    def of(cls, section: dict[str, Any]) -> TrackingSpec:
        return cls(tuple(section["report_to"]), section["run_name"], section["project"])
