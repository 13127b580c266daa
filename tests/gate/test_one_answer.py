"""Every fact the package derives from a brief has one home, and every public path that depends on it gives the
same answer on the same inputs: mixture of experts (gate, diagnose, memory), a local folder or a hub id (check,
render, sampling, the gate's model config), the number of training processes and TRL's batch rule (gate and
render). The cases are those of docs/development.md's "The loaded brief" and issue 37's reproductions: an ERNIE
4.5 MoE config that names `moe_num_experts`, a llava config whose experts sit in `text_config`, a data folder
`org/prompts` beside the brief, a bare `prompts` that exists nowhere, and a brief with batch 2, accumulation 4
and `overrides: {steps_per_generation: 3}`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_finetuning.brief import Brief, load_brief
from llm_finetuning.brief.check import check_brief
from llm_finetuning.brief.load import load_yaml_file
from llm_finetuning.brief.sections import data_is_local
from llm_finetuning.diagnose.context import load_context
from llm_finetuning.gate import run_gate
from llm_finetuning.memory.shapes import shape_from_config
from llm_finetuning.models import is_moe
from llm_finetuning.render.plan import RenderError, build_plan

SHAPE = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
         "intermediate_size": 128, "vocab_size": 256}
CONFIGS: dict[str, tuple[dict[str, Any], bool]] = {
    "ernie4_5_moe": ({"model_type": "ernie4_5_moe", "moe_num_experts": 64, **SHAPE}, True),
    "llava": ({"model_type": "llava", "text_config": {"model_type": "llama", "num_experts": 8, **SHAPE}}, True),
    "mixtral": ({"model_type": "mixtral", "num_local_experts": 8, **SHAPE}, True),
    "deepseek": ({"model_type": "deepseek_v3", "n_routed_experts": 256, **SHAPE}, True),
    "qwen2": ({"model_type": "qwen2", **SHAPE}, False),
    "one_expert": ({"model_type": "qwen2", "num_experts": 1, **SHAPE}, False),
}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def _loaded(path: Path) -> Brief:
    brief, errors = load_brief(path)
    assert brief is not None, errors
    return brief


@pytest.mark.parametrize("case", sorted(CONFIGS))
def test_gate_diagnose_and_memory_agree_on_mixture_of_experts(case: str, make_brief: Any, tmp_path: Path) -> None:
    config, moe = CONFIGS[case]
    path = make_brief("passing", records=False)
    (path.parent / "model").mkdir()
    (path.parent / "model" / "config.json").write_text(json.dumps(config))
    _edit(path, "id: Qwen/Qwen2.5-0.5B-Instruct", "id: ./model")
    [variant] = [c for c in run_gate(path).checks if c.id == "variant_table"]
    gate_says = "mixture of experts" in variant.message
    assert variant.verdict == ("fail" if moe else "pass") and ("dense model" in variant.message) is not moe
    diagnose_says = load_context(tmp_path / "no-run", brief=path).is_moe
    memory_says = shape_from_config(config, case).is_moe
    assert gate_says == diagnose_says == memory_says == is_moe(config) == moe


def _which_reader(brief: Brief, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which reader `finetune baseline`/`inspect` would use for data.train: "local" or "hub"."""
    from llm_finetuning.sampling import data

    called: list[str] = []

    def local(path: Path, yaml_path: str) -> list[dict[str, Any]]:
        called.append("local")
        return [{"prompt": "1+1", "answer": "2"}]

    def hub(dataset_id: str, split: str, yaml_path: str) -> list[dict[str, Any]]:
        called.append("hub")
        return [{"prompt": "1+1", "answer": "2"}]

    monkeypatch.setattr(data, "_read_local", local)
    monkeypatch.setattr(data, "_read_hub", hub)
    monkeypatch.setattr(data, "sha256_file", lambda path: "0" * 64)
    data.load_split(brief, "train")
    return called[0]


@pytest.mark.parametrize(("ref", "make", "local"), [
    ("org/prompts", "folder", True),  # a folder beside the brief, shaped like a hub id
    ("prompts", None, False),  # exists nowhere, no suffix: a hub dataset id
    ("openai/gsm8k", None, False),
    ("data/train.jsonl", "file", True),
])
def test_check_render_and_sampling_agree_on_local_or_hub_data(ref: str, make: str | None, local: bool,
                                                              make_brief: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_brief("passing", records=False)
    if make == "folder":
        (path.parent / ref).mkdir(parents=True)
        (path.parent / ref / "train.jsonl").write_text('{"prompt": "1+1", "answer": "2"}\n')
    _edit(path, "train: data/train.jsonl", f"train: {ref}")
    missing_local = [e for e in check_brief(load_yaml_file(path), path.parent) if e.path == "data.train"]
    assert not missing_local  # the folder exists; the hub id is not looked up by `finetune check`
    brief = _loaded(path)
    [dataset] = build_plan(brief, path.parent / "run").config()["datasets"]
    render_says = "data_files" in dataset
    assert render_says == _which_reader(brief, monkeypatch).startswith("local") == data_is_local(brief.data.train, brief.folder) \
        == local


@pytest.mark.parametrize(("model_id", "local"), [("./model", True), ("org/model", True), ("model", True),
                                                 ("Qwen/Qwen2.5-0.5B-Instruct", False)])
def test_check_gate_render_and_records_agree_on_local_or_hub_model(model_id: str, local: bool, make_brief: Any) -> None:
    from llm_finetuning.records.bindings import model_fingerprint

    path = make_brief("passing", records=False)
    if local:
        folder = path.parent / model_id
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(CONFIGS["qwen2"][0]))
    _edit(path, "id: Qwen/Qwen2.5-0.5B-Instruct", f"id: {model_id}")
    brief = _loaded(path)
    rendered = build_plan(brief, path.parent / "run").model_ref
    render_says = rendered != model_id  # a local folder is written relative to the run directory
    records_say = model_fingerprint(brief.model, brief.folder).startswith("local:")
    [variant] = [c for c in run_gate(path).checks if c.id == "variant_table"]
    gate_says = "config.json" in variant.message  # the gate read the local config
    assert render_says == records_say == gate_says == brief.model.is_local(brief.folder) == local


BATCHES = [
    # (grpo edits, hardware edits, TRL accepts)
    ({"per_device_train_batch_size: 8": "per_device_train_batch_size: 2"},
     {}, True),  # 2 x 1 x 4 = 8
    ({"per_device_train_batch_size: 8": "per_device_train_batch_size: 2",
      "gradient_accumulation_steps: 4": "gradient_accumulation_steps: 4\n  overrides: {steps_per_generation: 3}"},
     {}, False),  # 2 x 1 x 3 = 6: issue 37's brief that passed the gate and was refused by render
    ({"gradient_accumulation_steps: 4": "gradient_accumulation_steps: 4\n  overrides: {generation_batch_size: 20}"},
     {}, False),  # 20 is not a whole number of global batches of 8 (TRL refuses)
    ({"per_device_train_batch_size: 8": "per_device_train_batch_size: 1",
      "gradient_accumulation_steps: 4": "gradient_accumulation_steps: 1"},
     {"gpus: 1": "gpus: 8\n  vllm_server_gpus: 1", "generation: vllm-colocate": "generation: vllm-server"},
     False),  # 1 x 7 processes x 1 = 7
]


@pytest.mark.parametrize(("grpo", "hardware", "accepted"), BATCHES)
def test_gate_and_render_apply_one_batch_rule(grpo: dict[str, str], hardware: dict[str, str], accepted: bool,
                                              make_brief: Any) -> None:
    path = make_brief("passing", records=False)
    for old, new in {**grpo, **hardware}.items():
        _edit(path, old, new)
    brief = _loaded(path)
    [batch] = [c for c in run_gate(path).checks if c.id == "global_batch"]
    try:
        plan = build_plan(brief, path.parent / "run")
        render_accepts, processes = True, plan.topology.train_processes
    except RenderError as exc:
        render_accepts, processes = False, brief.hardware.training_processes
        assert [p.id for p in exc.problems] == ["generation_batch"]
    assert (batch.verdict == "pass") == render_accepts == accepted
    assert f"x {processes} training process(es)" in batch.message or "generation_batch_size" in batch.message
    assert processes == brief.hardware.training_processes
