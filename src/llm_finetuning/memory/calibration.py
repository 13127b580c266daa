"""Compare the estimator with measured GRPO runs (bench/results/memory-*.jsonl).

Used by the calibration test, the README table and `python -m llm_finetuning.memory.calibration`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_finetuning.memory.estimator import ALLOCATOR_SLACK, Estimate, Settings, estimate
from llm_finetuning.memory.shapes import lookup


@dataclass(frozen=True)
class Comparison:
    point: dict[str, Any]
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
        gc = "GC" if p["gc"] else "no GC"
        return (f"{p['model'].split('/')[-1]} {p['adapter']} {p['dtype']} beta={p['beta']:g} {gc} "
                f"B={p['B']}{' GA=' + str(p['GA']) if p.get('GA', 1) > 1 else ''} P+L={p['P']}+{p['L']}")


def settings_for(point: dict[str, Any], device_gib: float) -> Settings:
    """The estimator's settings for one calibration point (one GPU, transformers generation)."""
    return Settings(
        adapter=point["adapter"], dtype=point["dtype"], gpus=1, gpu_memory_gib=device_gib,
        num_generations=point["G"], per_device_batch=point["B"],
        gradient_accumulation_steps=point.get("GA", 1),
        max_completion_length=point["L"], prompt_tokens=point["P"], beta=point["beta"],
        generation="transformers", gradient_checkpointing=point["gc"], lora_r=16,
    )


def load(*paths: str | Path) -> list[Comparison]:
    """Every usable point of the calibration files, with the estimator's prediction."""
    out = []
    lines = [(Path(path).name, line) for path in paths for line in Path(path).read_text().splitlines()]
    for source, line in lines:
        rec = json.loads(line)
        if rec.get("error") or "peak_reserved_gib" not in rec:
            continue
        shape = lookup(rec["point"]["model"])
        assert shape is not None, rec["point"]["model"]
        device = float(rec["device_total_gib"])
        gens = [m["peak_alloc_gib"] for m in rec.get("marks", []) if m["label"] == "generation"]
        out.append(Comparison(rec["point"], rec["peak_reserved_gib"], rec["peak_alloc_gib"], bool(rec["oom"]),
                              device, estimate(shape, settings_for(rec["point"], device)),
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
