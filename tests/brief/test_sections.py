"""The brief's typed sections mirror the schema field for field, are built once by `load_brief`, and give
back exactly the values (and so the hashes) the defaulted mapping held."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import typing
from pathlib import Path
from typing import Any

import pytest

from llm_finetuning.brief import (
    Brief,
    DataSpec,
    EpisodeSpec,
    GrpoSpec,
    HardwareSpec,
    HeldOutEvalSpec,
    ModelSpec,
    ProtectionSpec,
    RecordsSpec,
    RewardSpec,
    TaskSpec,
    TrackingSpec,
    load_brief,
    schema,
)
from llm_finetuning.brief.sections import LoraSpec
from llm_finetuning.fileio import sha256_json

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BRIEFS = sorted(EXAMPLES.glob("*/brief.yaml"))
SECTIONS: dict[tuple[str, ...], type] = {
    ("task",): TaskSpec, ("model",): ModelSpec, ("model", "lora"): LoraSpec, ("data",): DataSpec,
    ("rewards", "items"): RewardSpec, ("episode",): EpisodeSpec, ("grpo",): GrpoSpec, ("hardware",): HardwareSpec,
    ("records",): RecordsSpec, ("protection",): ProtectionSpec, ("held_out_eval",): HeldOutEvalSpec,
    ("tracking",): TrackingSpec,
}
COMPUTED = {"name", "occurrence"}  # RewardSpec: the metric name and which occurrence of its fn it is
CONSTANTS = {"brief", "method"}  # top-level fields with a single allowed value: nothing to read


def _node(path: tuple[str, ...]) -> dict[str, Any]:
    node: dict[str, Any] = schema()
    for part in path:
        node = node[part] if part == "items" else node["properties"][part]
    return node


def _literal_values(hint: Any) -> set[Any]:
    """The values of the Literal in a field's type (`Variant`, `Symptom | None`), empty for other types."""
    if typing.get_origin(hint) is typing.Literal:
        return set(typing.get_args(hint))
    return {v for arg in typing.get_args(hint) for v in _literal_values(arg)}


def _fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _loaded(path: Path) -> Brief:
    brief, errors = load_brief(path)
    assert brief is not None, errors
    return brief


@pytest.mark.parametrize("path", list(SECTIONS), ids=".".join)
def test_each_section_has_the_schema_s_fields(path: tuple[str, ...]) -> None:
    assert _fields(SECTIONS[path]) - COMPUTED == set(_node(path)["properties"])


@pytest.mark.parametrize("path", list(SECTIONS), ids=".".join)
def test_each_enum_field_takes_the_schema_s_values(path: tuple[str, ...]) -> None:
    props = _node(path)["properties"]
    for name, hint in typing.get_type_hints(SECTIONS[path]).items():
        enum = props.get(name, {}).get("enum")
        where = f"{'.'.join(path)}.{name}"
        if enum is not None:
            assert _literal_values(hint) == {v for v in enum if v is not None}, where
        else:
            assert not _literal_values(hint), f"{where} is a Literal but the schema gives it no enum"


def test_the_brief_has_an_attribute_for_every_top_level_field() -> None:
    named = {"output_dir": "output_dir_setting"}
    wanted = {named.get(k, k) for k in schema()["properties"]} - CONSTANTS
    assert wanted <= _fields(Brief)


@pytest.mark.parametrize("path", BRIEFS, ids=lambda p: p.parent.name)
def test_sections_hold_the_defaulted_values(path: Path) -> None:
    brief = _loaded(path)
    data = brief.as_mapping()
    for section, cls in SECTIONS.items():
        if section[-1] in ("items", "lora") or (section == ("episode",) and brief.episode is None):
            continue
        value = getattr(brief, section[0])
        assert isinstance(value, cls)
        for name in _fields(cls):
            got, want = getattr(value, name), data[section[0]].get(name)
            if isinstance(got, tuple):
                got = list(got)
            elif isinstance(got, LoraSpec):
                got = {f: (list(v) if isinstance(v, tuple) else v) for f, v in dataclasses.asdict(got).items()}
            elif name in ("overrides", "chat_template_kwargs"):
                got = dict(got)
            assert got == want, f"{section[0]}.{name}"
    # a reward spec gives back its entry exactly: the records' hashes of it do not move
    assert [r.as_mapping() for r in brief.rewards] == data["rewards"]
    assert sha256_json([r.as_mapping() for r in brief.rewards]) == sha256_json(data["rewards"])
    assert brief.reward_names == [r.name for r in brief.rewards]


def test_sections_are_frozen_and_the_mapping_is_a_copy() -> None:
    brief = _loaded(EXAMPLES / "math-exact/brief.yaml")
    with pytest.raises(dataclasses.FrozenInstanceError):
        brief.grpo.learning_rate = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        brief.rewards[0].args["answer_field"] = "x"  # type: ignore[index]
    data = brief.as_mapping()
    data["grpo"]["learning_rate"] = 1.0
    assert brief.grpo.learning_rate == brief.as_mapping()["grpo"]["learning_rate"] != 1.0
    changed = brief.replaced(data)
    assert changed.grpo.learning_rate == 1.0 and changed.sha256 == brief.sha256
    assert pickle.loads(pickle.dumps(brief)) == copy.deepcopy(brief) == brief  # a Brief travels to workers


def test_states_tells_a_written_field_from_a_default() -> None:
    brief = _loaded(EXAMPLES / "math-exact/brief.yaml")  # writes hardware.gpus, leaves vllm_server_gpus out
    assert brief.states("hardware.gpus") and brief.states("rewards")
    assert not brief.states("hardware.vllm_server_gpus") and brief.hardware.vllm_server_gpus == 1
    assert not brief.states("grpo.seed.deeper") and not brief.states("no_such.field")


def test_with_model_points_at_a_local_folder(tmp_path: Path) -> None:
    brief = _loaded(EXAMPLES / "math-exact/brief.yaml")
    other = brief.with_model(str(tmp_path))
    assert (other.model.id, other.model.revision, other.model.gguf_file) == (str(tmp_path), None, None)
    assert other.rewards == brief.rewards and other.grpo == brief.grpo
