"""The GRPO brief: schema (brief.schema.json), safe loading, defaults and consistency checks.

Pure: no torch, transformers, trl or vllm. Use `load_brief(path)` to get a checked `Brief` or the list
of every `Problem` with it at once.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

from llm_finetuning.brief.batch import MIN_NUM_GENERATIONS, GenerationBatch
from llm_finetuning.brief.defaults import apply_defaults, object_at, recipe_defaults, schema, whole_numbers
from llm_finetuning.brief.episode import EpisodeSpec
from llm_finetuning.brief.sections import (
    DataSpec,
    GrpoSpec,
    HardwareSpec,
    HeldOutEvalSpec,
    ModelSpec,
    ProtectionSpec,
    RecordsSpec,
    RewardSpec,
    TaskSpec,
    TrackingSpec,
    object_of,
    optional_of,
    reward_specs,
)
from llm_finetuning.errors import Problem
from llm_finetuning.fileio import sha256_bytes
from llm_finetuning.jsonvalue import JsonObject, JsonValue

RECIPE_LEARNING_RATE = 5e-7
RECIPE_BETA = 0.01


@dataclass(frozen=True)
class Brief:
    """A loaded, valid brief with defaults applied, its sections typed (`brief.grpo.learning_rate`,
    `brief.rewards[0].fn`); relative paths resolve against `folder`. Build one with `Brief.of`."""

    path: Path
    sha256: str
    name: str
    task: TaskSpec
    model: ModelSpec
    data: DataSpec
    rewards: tuple[RewardSpec, ...]
    grpo: GrpoSpec
    hardware: HardwareSpec
    records: RecordsSpec
    protection: ProtectionSpec
    held_out_eval: HeldOutEvalSpec
    tracking: TrackingSpec
    episode: EpisodeSpec | None
    output_dir_setting: str | None
    text: str = field(repr=False, default="")
    _defaulted: JsonObject = field(repr=False, compare=False, default_factory=dict)
    _raw: JsonObject = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def of(cls, path: Path, raw: JsonObject, sha256: str, text: str, defaulted: JsonObject | None = None) -> Brief:
        """The brief of a validated mapping `raw` (as the YAML file gave it); `defaulted` is
        `apply_defaults(raw)` when the caller has it already. Each section is parsed into its typed value here,
        once (TypeError for a mapping the schema did not pass)."""
        d = apply_defaults(raw) if defaulted is None else defaulted
        return cls(
            path=path, sha256=sha256, name=str(d["name"]), task=TaskSpec.of(object_of(d, "task")),
            model=ModelSpec.of(object_of(d, "model")), data=DataSpec.of(object_of(d, "data")),
            rewards=reward_specs(d["rewards"]), grpo=GrpoSpec.of(object_of(d, "grpo")),
            hardware=HardwareSpec.of(object_of(d, "hardware")), records=RecordsSpec.of(object_of(d, "records")),
            protection=ProtectionSpec.of(object_of(d, "protection")),
            held_out_eval=HeldOutEvalSpec.of(object_of(d, "held_out_eval")), tracking=TrackingSpec.of(object_of(d, "tracking")),
            episode=EpisodeSpec.of(d), output_dir_setting=optional_of(d, "output_dir", str),
            text=text, _defaulted=copy.deepcopy(d), _raw=copy.deepcopy(raw))

    @property
    def folder(self) -> Path:
        return self.path.parent

    def resolve(self, rel: str) -> Path:
        p = Path(rel).expanduser()
        return p if p.is_absolute() else (self.folder / p)

    @property
    def output_dir(self) -> Path:
        return self.resolve(self.output_dir_setting or f"runs/{self.name}")

    @property
    def reward_names(self) -> list[str]:
        """The metric name of each reward, in order (`fn`, `fn#2` where a name repeats)."""
        return [r.name for r in self.rewards]

    @property
    def has_judge(self) -> bool:
        """Whether a reward is the LLM judge (which needs its calibration record)."""
        return any(r.is_judge for r in self.rewards)

    def as_mapping(self, defaulted: bool = True) -> JsonObject:
        """A copy of the brief as a plain mapping: with the schema's defaults (what the renderer copies into
        GRPOConfig and the manifest, and records hash), or as the file gave it (`defaulted=False`, what the
        gate's cache keeps). Read a field through the typed sections instead; this is for whole-mapping uses."""
        return copy.deepcopy(self._defaulted if defaulted else self._raw)

    def states(self, dotted: str) -> bool:
        """Whether the brief's file itself sets the field (`hardware.vllm_server_gpus`), not its default."""
        node: JsonValue = self._raw
        for key in dotted.split("."):
            if not isinstance(node, dict) or key not in node:
                return False
            node = node[key]
        return True

    def with_model(self, model_id: str) -> Brief:
        """The same brief with `model.id` pointed at `model_id` (a local folder: no GGUF file, no revision)."""
        d = self.as_mapping()
        d["model"] = {**object_at(d, "model"), "id": model_id, "gguf_file": None, "revision": None}
        return self.replaced(d)

    def replaced(self, defaulted: JsonObject) -> Brief:
        """This brief's file (path, text, sha256) with other defaulted values, unchecked: for a trained model's
        evaluation (`with_model`), and for tests and benchmarks that vary one field."""
        return Brief.of(self.path, self._raw, self.sha256, self.text, defaulted=defaulted)


def _whole_numbers(raw: JsonObject) -> JsonObject:
    """`defaults.whole_numbers` on the brief and on each built-in reward's args (by that reward's schema)."""
    from llm_finetuning import reward_registry as registry

    out = whole_numbers(raw)
    rewards = out.get("rewards")
    for spec in rewards if isinstance(rewards, list) else []:
        fn = spec.get("fn") if isinstance(spec, dict) else None
        args = spec.get("args") if isinstance(spec, dict) else None
        if isinstance(spec, dict) and isinstance(fn, str) and fn in registry.BUILTINS and isinstance(args, dict):
            spec["args"] = whole_numbers(args, registry.BUILTINS[fn][1])
    return out


def load_brief(path: str | Path) -> tuple[Brief | None, list[Problem]]:
    """Load, validate and default a brief. Returns (brief, errors); brief is None when errors exist.

    Raises `UnusableInput` when the file cannot be read as YAML at all.
    """
    from llm_finetuning.brief.check import check_brief
    from llm_finetuning.brief.load import load_yaml_file

    p = Path(path)
    raw = _whole_numbers(load_yaml_file(p))
    text = p.read_text(encoding="utf-8")
    errors = check_brief(raw, p.resolve().parent)
    if errors:
        return None, errors
    return Brief.of(p.resolve(), raw, sha256_bytes(text.encode("utf-8")), text), []


__all__ = [
    "MIN_NUM_GENERATIONS",
    "GenerationBatch",
    "RECIPE_BETA",
    "RECIPE_LEARNING_RATE",
    "Brief",
    "DataSpec",
    "EpisodeSpec",
    "GrpoSpec",
    "HardwareSpec",
    "HeldOutEvalSpec",
    "ModelSpec",
    "ProtectionSpec",
    "RecordsSpec",
    "RewardSpec",
    "TaskSpec",
    "TrackingSpec",
    "apply_defaults",
    "load_brief",
    "recipe_defaults",
    "schema",
]
