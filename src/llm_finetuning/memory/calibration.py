"""Compare the estimator with measured GRPO runs (bench/results/memory-*.jsonl).

Used by the calibration test, the README table and `python -m llm_finetuning.memory.calibration`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.memory.estimator import ALLOCATOR_SLACK, Estimate, Settings, estimate
from llm_finetuning.memory.shapes import lookup


def _number(record: JsonObject, key: str) -> float:
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{key} is {value!r}, not a number")
    return float(value)


def _whole(record: JsonObject, key: str, default: int | None = None) -> int:
    value = record[key] if default is None else record.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} is {value!r}, not a whole number")
    return value


def _text(record: JsonObject, key: str) -> str:
    value = record[key]
    if not isinstance(value, str):
        raise ValueError(f"{key} is {value!r}, not a string")
    return value


def _object(value: JsonValue, what: str) -> JsonObject:
    if not isinstance(value, dict):
        raise ValueError(f"{what} is {value!r}, not a JSON object")
    return value


@dataclass(frozen=True)
class Point:
    """The settings of one measured run, parsed from the `point` of its line (bench/memory_calibration.py names
    them B, G, GA, P, L and gc)."""

    model: str
    adapter: str
    dtype: str
    beta: float
    gradient_checkpointing: bool
    per_device_batch: int
    num_generations: int
    prompt_tokens: int
    max_completion_length: int
    gradient_accumulation_steps: int = 1

    @classmethod
    def of(cls, point: JsonObject) -> Point:
        return cls(_text(point, "model"), _text(point, "adapter"), _text(point, "dtype"), _number(point, "beta"),
                   bool(point["gc"]), _whole(point, "B"), _whole(point, "G"), _whole(point, "P"), _whole(point, "L"),
                   _whole(point, "GA", 1))


@dataclass(frozen=True)
class Comparison:
    point: Point
    measured_reserved_gib: float
    measured_allocated_gib: float
    oom: bool
    device_gib: float
    predicted: Estimate
    measured_generation_alloc_gib: float | None = None  # peak allocated in the last generation phase
    source: str = ""

    @property
    def error(self) -> float:
        """Relative error of predicted against measured peak reserved memory."""
        return self.predicted.total_gib / self.measured_reserved_gib - 1

    @property
    def generation_error(self) -> float | None:
        """Relative error of the predicted generation phase (allocated) against the measured one."""
        if self.measured_generation_alloc_gib is None:
            return None
        predicted = self.predicted.phases["generation"] / ALLOCATOR_SLACK
        return predicted / self.measured_generation_alloc_gib - 1

    @property
    def verdict_right(self) -> bool:
        return self.predicted.fits == (not self.oom)

    def label(self) -> str:
        p = self.point
        gc = "GC" if p.gradient_checkpointing else "no GC"
        ga = p.gradient_accumulation_steps
        return (f"{p.model.split('/')[-1]} {p.adapter} {p.dtype} beta={p.beta:g} {gc} "
                f"B={p.per_device_batch}{' GA=' + str(ga) if ga > 1 else ''} P+L={p.prompt_tokens}+{p.max_completion_length}")


def settings_for(point: Point, device_gib: float) -> Settings:
    """The estimator's settings for one calibration point (one GPU, transformers generation)."""
    return Settings(
        adapter=point.adapter, dtype=point.dtype, gpus=1, gpu_memory_gib=device_gib,
        num_generations=point.num_generations, per_device_batch=point.per_device_batch,
        gradient_accumulation_steps=point.gradient_accumulation_steps,
        max_completion_length=point.max_completion_length, prompt_tokens=point.prompt_tokens, beta=point.beta,
        generation="transformers", gradient_checkpointing=point.gradient_checkpointing, lora_r=16,
    )


def load(*paths: str | Path) -> list[Comparison]:
    """Every usable point of the calibration files, with the estimator's prediction."""
    out = []
    lines = [(Path(path).name, line) for path in paths for line in Path(path).read_text().splitlines()]
    for source, line in lines:
        rec = _object(json.loads(line), f"a line of {source}")
        if rec.get("error") or "peak_reserved_gib" not in rec:
            continue
        point = Point.of(_object(rec["point"], "point"))
        shape = lookup(point.model)
        assert shape is not None, point.model
        device = _number(rec, "device_total_gib")
        found = rec.get("marks")
        marks = [_object(m, "a mark") for m in found] if isinstance(found, list) else []
        gens = [_number(m, "peak_alloc_gib") for m in marks if m["label"] == "generation"]
        out.append(Comparison(point, _number(rec, "peak_reserved_gib"), _number(rec, "peak_alloc_gib"),
                              bool(rec["oom"]), device, estimate(shape, settings_for(point, device)),
                              gens[-1] if gens else None, source))
    return out


def table(rows: list[Comparison]) -> str:
    """A Markdown table: predicted vs measured peak reserved memory and the fit verdict."""
    lines = ["| run (H200, TRL 1.16, transformers generation) | measured peak reserved | predicted | error "
             "| run verdict | predicted verdict |", "| --- | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        measured = "OOM" if r.oom else "fits"
        predicted = "fits" if r.predicted.fits else "does not fit"
        reserved = f">= {r.measured_reserved_gib:.1f} GiB" if r.oom else f"{r.measured_reserved_gib:.1f} GiB"
        err = "n/a" if r.oom else f"{r.error:+.1%}"
        lines.append(f"| {r.label()} | {reserved} | {r.predicted.total_gib:.1f} GiB | {err} | {measured} "
                     f"| {predicted} |")
    return "\n".join(lines)


DEFAULT_FILES = ("bench/results/memory-h200.jsonl", "bench/results/memory-h200-validation.jsonl",
                 "bench/results/memory-h200-lora-float32.jsonl")

if __name__ == "__main__":
    rows = load(*(sys.argv[1:] or DEFAULT_FILES))
    print(table(rows))
    for r in rows:
        print(r.label(), {k: round(v, 2) for k, v in r.predicted.components.items()}, r.predicted.phases,
              f"alloc measured {r.measured_allocated_gib:.2f}", file=sys.stderr)
