"""The brief's sections as frozen values, built once by `load_brief` from the validated, defaulted mapping.

Each class mirrors one object of brief.schema.json, field for field (references/brief-fields.md, generated
from the schema, describes them). Values are taken as the schema validated them, not converted: a
`weight: 1` stays the int 1, so a spec hashed or rendered from these values is byte for byte the one the
mapping gave. Lists become tuples, and free-form objects (`rewards[*].args`, `grpo.overrides`,
`data.chat_template_kwargs`) read-only mappings. Each field is read with its type checked (`value_of`, `number_of`, ...):
a value of another type means the mapping did not pass the schema, and raises TypeError naming the field.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar, get_args

from llm_finetuning import reward_registry as registry
from llm_finetuning.brief.batch import GenerationBatch
from llm_finetuning.jsonvalue import JsonObject, JsonValue
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
MODALITIES: tuple[Modality, ...] = get_args(Modality)
ARCHITECTURES: tuple[Architecture, ...] = get_args(Architecture)
DTYPES: tuple[Dtype, ...] = get_args(Dtype)
ADAPTERS: tuple[Adapter, ...] = get_args(Adapter)
VARIANTS: tuple[Variant, ...] = get_args(Variant)
SYMPTOMS: tuple[Symptom, ...] = get_args(Symptom)
LR_SCHEDULERS: tuple[LrScheduler, ...] = get_args(LrScheduler)
GENERATIONS: tuple[Generation, ...] = get_args(Generation)
T = TypeVar("T")
Choice = TypeVar("Choice", bound=str)

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


# Typed reads of a validated mapping's fields (a brief's section, the schema's defaults): a value of another type
# means the mapping did not pass the schema, and raises TypeError naming the field.

def value_of(section: JsonObject, key: str, kind: type[T]) -> T:
    """`section[key]`, which the schema gave the type `kind`."""
    value = section[key]
    if not isinstance(value, kind):
        raise TypeError(f"{key}: found {value!r}, expected {kind.__name__} (the mapping did not pass the schema)")
    return value


def optional_of(section: JsonObject, key: str, kind: type[T]) -> T | None:
    return None if section[key] is None else value_of(section, key, kind)


def number_of(section: JsonObject, key: str) -> float:
    """A number field as the brief wrote it: `1` stays the int 1 (so hashes and rendered values match the mapping)."""
    value = section[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{key}: found {value!r}, expected a number (the mapping did not pass the schema)")
    return value


def optional_number_of(section: JsonObject, key: str) -> float | None:
    return None if section[key] is None else number_of(section, key)


def choice_of(section: JsonObject, key: str, choices: tuple[Choice, ...]) -> Choice:
    """An enum field, as the Literal type that lists its values."""
    value = section[key]
    for choice in choices:
        if value == choice:
            return choice
    raise TypeError(f"{key}: found {value!r}, expected one of {', '.join(choices)} (the mapping did not pass the schema)")


def strings_of(value: JsonValue, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{key}: found {value!r}, expected a list of strings (the mapping did not pass the schema)")
    return tuple(str(v) for v in value)


def object_of(section: JsonObject, key: str) -> JsonObject:
    value = section[key]
    if not isinstance(value, dict):
        raise TypeError(f"{key}: found {value!r}, expected a mapping (the mapping did not pass the schema)")
    return value


def objects_of(value: JsonValue, key: str) -> list[JsonObject]:
    if not isinstance(value, list):
        raise TypeError(f"{key}: found {value!r}, expected a list (the mapping did not pass the schema)")
    return [object_of({key: v}, key) for v in value]


class FrozenMapping(Mapping[str, JsonValue]):
    """A read-only copy of a free-form object of the brief. Unlike `types.MappingProxyType` it pickles and
    deep-copies, so a Brief does too; it equals a dict with the same items."""

    __slots__ = ("_items",)

    def __init__(self, value: Mapping[str, JsonValue] | None = None) -> None:
        self._items: JsonObject = copy.deepcopy(dict(value or {}))

    def __getitem__(self, key: str) -> JsonValue:
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
    def of(cls, section: JsonObject) -> TaskSpec:
        return cls(value_of(section, "summary", str), choice_of(section, "modality", MODALITIES))


@dataclass(frozen=True)
class LoraSpec:
    """`model.lora`: the adapter's settings (read with `model.adapter` lora or qlora). Its defaults are the
    schema's, and nowhere else (`LoraSpec.default()`)."""

    r: int
    alpha: int
    dropout: float
    target_modules: str | tuple[str, ...]

    @classmethod
    def of(cls, section: JsonObject) -> LoraSpec:
        targets = section["target_modules"]
        return cls(value_of(section, "r", int), value_of(section, "alpha", int), number_of(section, "dropout"),
                   targets if isinstance(targets, str) else strings_of(targets, "target_modules"))

    @classmethod
    def default(cls) -> LoraSpec:
        """The schema's `model.lora` defaults."""
        from llm_finetuning.brief.defaults import apply_defaults, object_at, schema

        model = object_at(object_at(schema(), "properties"), "model")
        return cls.of(apply_defaults({}, object_at(object_at(model, "properties"), "lora")))

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
    def of(cls, section: JsonObject) -> ModelSpec:
        return cls(value_of(section, "id", str), optional_of(section, "revision", str),
                   optional_of(section, "gguf_file", str), choice_of(section, "architecture", ARCHITECTURES),
                   choice_of(section, "dtype", DTYPES), choice_of(section, "adapter", ADAPTERS),
                   LoraSpec.of(object_of(section, "lora")))

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
    chat_template_kwargs: Mapping[str, JsonValue]

    @classmethod
    def of(cls, section: JsonObject) -> DataSpec:
        return cls(value_of(section, "train", str), optional_of(section, "eval", str), value_of(section, "split", str),
                   value_of(section, "prompt_field", str), optional_of(section, "system_prompt", str),
                   FrozenMapping(object_of(section, "chat_template_kwargs")))

    def eval_is_split(self, folder: Path) -> bool:
        """`data.eval` names another split of the hub dataset `data.train` (e.g. `test`), not data of its own."""
        return (bool(self.eval) and "/" not in str(self.eval) and not data_is_local(str(self.eval), folder)
                and not data_is_local(self.train, folder))


@dataclass(frozen=True)
class RewardSpec:
    """One entry of `rewards`, with the metric name TRL logs it under (`fn`, or `fn#2` where `fn` repeats)."""

    fn: str
    weight: float
    args: Mapping[str, JsonValue]
    name: str
    occurrence: int  # 1 for the first reward with this fn, 2 for the second, ...

    @property
    def is_judge(self) -> bool:
        return self.fn == "judge"

    def as_mapping(self) -> JsonObject:
        """The entry as the defaulted brief holds it: what `rewards.build_reward` takes and records hash."""
        return {"fn": self.fn, "weight": self.weight, "args": copy.deepcopy(dict(self.args))}


def reward_specs(rewards: JsonValue) -> tuple[RewardSpec, ...]:
    """The defaulted `rewards` list as specs, named as `reward_registry.reward_names` names them."""
    entries = objects_of(rewards, "rewards")
    names, occurrences = registry.reward_names(entries), registry.reward_occurrences(entries)
    return tuple(RewardSpec(value_of(e, "fn", str), number_of(e, "weight"), FrozenMapping(object_of(e, "args")), name, k)
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
    overrides: Mapping[str, JsonValue]

    @classmethod
    def of(cls, section: JsonObject) -> GrpoSpec:
        symptom = section["symptom"]
        return cls(
            variant=choice_of(section, "variant", VARIANTS),
            symptom=None if symptom is None else choice_of(section, "symptom", SYMPTOMS),
            num_generations=value_of(section, "num_generations", int),
            learning_rate=number_of(section, "learning_rate"),
            lr_scheduler=choice_of(section, "lr_scheduler", LR_SCHEDULERS),
            warmup_ratio=number_of(section, "warmup_ratio"),
            beta=number_of(section, "beta"),
            per_device_train_batch_size=value_of(section, "per_device_train_batch_size", int),
            gradient_accumulation_steps=value_of(section, "gradient_accumulation_steps", int),
            max_prompt_length=value_of(section, "max_prompt_length", int),
            max_completion_length=value_of(section, "max_completion_length", int),
            temperature=number_of(section, "temperature"),
            max_steps=value_of(section, "max_steps", int),
            gradient_checkpointing=value_of(section, "gradient_checkpointing", bool),
            logging_steps=value_of(section, "logging_steps", int),
            save_steps=value_of(section, "save_steps", int),
            seed=value_of(section, "seed", int),
            deviation=optional_of(section, "deviation", str),
            overrides=FrozenMapping(object_of(section, "overrides")),
        )

    def whole_override(self, key: str) -> int | None:
        """`grpo.overrides[key]` as the int TRL's field takes (`int()` of what the brief wrote), None when the
        override is absent or null; TypeError for a list or mapping."""
        value = self.overrides.get(key)
        if value is None:
            return None
        if isinstance(value, (list, dict)):
            raise TypeError(f"grpo.overrides.{key}: found {value!r}, expected a whole number")
        return int(value)

    def number_override(self, key: str, default: float) -> float:
        """`grpo.overrides[key]` as the float TRL's field takes (`float()` of what the brief wrote), `default` when
        the override is absent; TypeError for null, a list or a mapping."""
        value = self.overrides.get(key, default)
        if value is None or isinstance(value, (list, dict)):
            raise TypeError(f"grpo.overrides.{key}: found {value!r}, expected a number")
        return float(value)

    @property
    def steps_per_generation(self) -> int | None:
        """Optimizer steps per generation batch: the override, else one accumulation cycle (four for GSPO,
        whose sequence ratio only matters off-policy: paper v2, 5.1); None when `generation_batch_size` is
        overridden instead (TRL takes one or the other)."""
        if "steps_per_generation" in self.overrides:
            return self.whole_override("steps_per_generation")
        if "generation_batch_size" in self.overrides:
            return None
        return self.gradient_accumulation_steps * (4 if self.variant == "gspo" else 1)

    def generation_batch(self, processes: int) -> GenerationBatch:
        """The completions generated at once with `processes` training processes, held to TRL's rule."""
        return GenerationBatch(self.per_device_train_batch_size, processes, self.steps_per_generation,
                               self.num_generations, self.gradient_accumulation_steps,
                               "steps_per_generation" in self.overrides, self.whole_override("generation_batch_size"))


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
    def of(cls, section: JsonObject) -> HardwareSpec:
        return cls(value_of(section, "gpus", int), value_of(section, "nodes", int), number_of(section, "gpu_memory_gib"),
                   choice_of(section, "generation", GENERATIONS), value_of(section, "vllm_server_gpus", int),
                   optional_number_of(section, "vllm_gpu_memory_utilization"),
                   value_of(section, "compiled_generation", bool))

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
    def of(cls, section: JsonObject) -> RecordsSpec:
        return cls(value_of(section, "baseline", str), value_of(section, "inspection", str),
                   value_of(section, "judge_calibration", str))

    def paths(self) -> tuple[str, ...]:
        """Every record path, in schema order."""
        return self.baseline, self.inspection, self.judge_calibration


@dataclass(frozen=True)
class ProtectionSpec:
    """`protection`: whether the gate requires `finetune protect` inside Claude Code."""

    required: bool
    reason: str | None

    @classmethod
    def of(cls, section: JsonObject) -> ProtectionSpec:
        return cls(value_of(section, "required", bool), optional_of(section, "reason", str))


@dataclass(frozen=True)
class HeldOutEvalSpec:
    """`held_out_eval`: evaluation during training (`every_steps` 0: off)."""

    every_steps: int
    prompts: int
    k: int

    @classmethod
    def of(cls, section: JsonObject) -> HeldOutEvalSpec:
        return cls(value_of(section, "every_steps", int), value_of(section, "prompts", int), value_of(section, "k", int))


@dataclass(frozen=True)
class TrackingSpec:
    """`tracking`: the experiment trackers besides metrics.jsonl."""

    report_to: tuple[str, ...]
    run_name: str | None
    project: str | None

    @classmethod
    def of(cls, section: JsonObject) -> TrackingSpec:
        return cls(strings_of(section["report_to"], "report_to"), optional_of(section, "run_name", str),
                   optional_of(section, "project", str))
