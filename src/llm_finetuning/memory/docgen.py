"""Generate the sizing tables of references/grpo-memory.md and the bytes-per-parameter tables of
references/lora-qlora.md from the estimator, and check them in CI.

    python -m llm_finetuning.memory.docgen --write   # rewrite the generated blocks
    python -m llm_finetuning.memory.docgen --check   # exit 1 when a page is out of date

Only the text between the BEGIN/END markers is generated; the prose around it is written by hand.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from llm_finetuning.brief import recipe_defaults
from llm_finetuning.brief.sections import number_of, value_of
from llm_finetuning.memory.estimator import GIB, Settings, estimate, state_bytes_per_parameter
from llm_finetuning.memory.shapes import ModelShape, lookup

REFERENCES = Path(__file__).resolve().parents[3] / "references"
PAGE = REFERENCES / "grpo-memory.md"
BYTES_PAGE = REFERENCES / "lora-qlora.md"
BEGIN = "<!-- BEGIN GENERATED: python -m llm_finetuning.memory.docgen --write -->"
END = "<!-- END GENERATED -->"
CARDS = (24.0, 48.0, 80.0, 141.0)

SIZE_CLASSES: list[tuple[str, str]] = [
    ("~0.5 B", "Qwen/Qwen2.5-0.5B-Instruct"),
    ("~1.5 B", "Qwen/Qwen2.5-1.5B-Instruct"),
    ("~3 B", "Qwen/Qwen2.5-3B-Instruct"),
    ("~7-8 B", "Qwen/Qwen2.5-7B-Instruct"),
    ("~7-8 B", "meta-llama/Llama-3.1-8B-Instruct"),
    ("~14 B", "Qwen/Qwen2.5-14B-Instruct"),
    ("~32 B", "Qwen/Qwen2.5-32B-Instruct"),
    ("~70 B", "meta-llama/Llama-3.3-70B-Instruct"),
    ("MoE 30B-A3B", "Qwen/Qwen3-30B-A3B"),
]



def recipe_settings() -> Settings:
    """The recipe the tables assume: the brief schema's defaults, on one GPU with transformers generation."""
    grpo = recipe_defaults()
    return Settings(
        adapter="full", dtype="bfloat16", gpus=1, gpu_memory_gib=80.0,
        num_generations=value_of(grpo, "num_generations", int),
        per_device_batch=value_of(grpo, "per_device_train_batch_size", int),
        gradient_accumulation_steps=value_of(grpo, "gradient_accumulation_steps", int),
        max_completion_length=value_of(grpo, "max_completion_length", int), prompt_tokens=512,
        beta=number_of(grpo, "beta"),
        generation="transformers", gradient_checkpointing=True,
    )


BASE = recipe_settings()


def _shape(model_id: str) -> ModelShape:
    shape = lookup(model_id)
    assert shape is not None, model_id
    return shape


def _smallest_card(shape: ModelShape, s: Settings) -> str:
    for card in CARDS:
        if estimate(shape, replace(s, gpu_memory_gib=card)).fits:
            return f"{card:g}"
    return "none"


def _cell(shape: ModelShape, s: Settings) -> str:
    est = estimate(shape, replace(s, gpu_memory_gib=max(CARDS)))
    return f"{est.device_total_gib:.0f} ({_smallest_card(shape, s)})"


def render_tables() -> str:
    """The generated Markdown: per-GPU peak by size class and method, and the colocate settings."""
    b = BASE
    out = [
        "Per-GPU peak in GiB (PyTorch peak reserved plus the CUDA context), and in brackets the smallest of "
        f"24/48/80/141 GiB cards it fits. Recipe (the brief's defaults): G={b.num_generations}, per-device batch "
        f"{b.per_device_batch}, gradient accumulation {b.gradient_accumulation_steps} "
        f"({b.per_device_batch * b.gradient_accumulation_steps} completions generated at once per GPU), prompt "
        f"{b.prompt_tokens} + completion {b.max_completion_length} tokens, beta {b.beta:g}, "
        "gradient checkpointing on, bf16 weights, transformers generation.",
        "",
        "| size class | model | params | full, 1 GPU | full, fp32 load, 1 GPU | full, ZeRO-3 on 8 GPUs "
        "| LoRA r16, 1 GPU | QLoRA r16, 1 GPU |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size, model_id in SIZE_CLASSES:
        shape = _shape(model_id)
        cells = [
            _cell(shape, BASE),
            _cell(shape, replace(BASE, dtype="float32")),
            _cell(shape, replace(BASE, gpus=8, distributed="zero3")),
            _cell(shape, replace(BASE, adapter="lora")),
            _cell(shape, replace(BASE, adapter="qlora")),
        ]
        out.append(f"| {size} | {model_id} | {shape.params() / 1e9:.1f} B | " + " | ".join(cells) + " |")
    out += [
        "",
        "vLLM colocate on one 80 GiB card (same recipe, LoRA for 14 B and up): the share the estimator "
        "gives vLLM, whether sleep mode is needed, and the per-GPU peak.",
        "",
        "| model | adapter | vllm_gpu_memory_utilization | sleep mode | peak GiB | fits 80 GiB |",
        "| --- | --- | ---: | --- | ---: | --- |",
    ]
    for _, model_id in SIZE_CLASSES:
        shape = _shape(model_id)
        adapter = "full" if shape.params() < 10e9 else "lora"
        est = estimate(shape, replace(BASE, generation="vllm-colocate", adapter=adapter,
                                      vllm_gpu_memory_utilization=None, vllm_enable_sleep_mode=None))
        rec = est.recommend
        out.append(f"| {model_id} | {adapter} | {rec['vllm_gpu_memory_utilization']} | "
                   f"{'on' if rec['vllm_enable_sleep_mode'] else 'off'} | {est.device_total_gib:.0f} | "
                   f"{'yes' if est.fits else 'no'} |")
    out += [
        "",
        "What one change does to Qwen2.5-7B (full, 1 GPU, the recipe above); per-GPU peak in GiB:",
        "",
        "| change | peak GiB | vs the recipe |",
        "| --- | ---: | ---: |",
    ]
    shape = _shape("Qwen/Qwen2.5-7B-Instruct")
    base = estimate(shape, replace(BASE, gpu_memory_gib=141.0)).device_total_gib
    changes: list[tuple[str, Settings]] = [
        ("none (the recipe)", BASE),
        ("no gradient checkpointing", replace(BASE, gradient_checkpointing=False)),
        ("beta 0 (no reference model)", replace(BASE, beta=0.0)),
        ("weights loaded in float32 (TRL's default for a path)", replace(BASE, dtype="float32")),
        ("per-device batch 4, accumulation 8", replace(BASE, per_device_batch=4, gradient_accumulation_steps=8)),
        (f"completion {2 * BASE.max_completion_length} tokens",
         replace(BASE, max_completion_length=2 * BASE.max_completion_length)),
        ("LoRA r16", replace(BASE, adapter="lora")),
        ("ZeRO-2 on 4 GPUs", replace(BASE, gpus=4, distributed="zero2")),
        ("ZeRO-3 on 4 GPUs", replace(BASE, gpus=4, distributed="zero3")),
    ]
    for label, s in changes:
        peak = estimate(shape, replace(s, gpu_memory_gib=141.0)).device_total_gib
        out.append(f"| {label} | {peak:.1f} | {peak - base:+.1f} |")
    return "\n".join(out)


# (label, adapter, dtype, distributed) of the bytes-per-parameter table
STATE_ROWS: list[tuple[str, str, str, str]] = [
    ("full, bf16 weights, torch AdamW", "full", "bfloat16", "single"),
    ("full, weights loaded in float32 (bf16 autocast)", "full", "float32", "single"),
    ("full, bf16 weights, DeepSpeed ZeRO-2/3 (before sharding)", "full", "bfloat16", "zero3"),
    ("LoRA, bf16 base", "lora", "bfloat16", "single"),
    ("QLoRA, NF4 base", "qlora", "bfloat16", "single"),
]
SIZES_B = (0.5, 1.5, 7.0, 14.0, 70.0)


def state_bytes_total(adapter: str, dtype: str, distributed: str = "single") -> float:
    """Bytes per model parameter resident for training: all of them for full fine-tuning; the frozen
    base alone for LoRA/QLoRA (the adapter is under 1% of the model)."""
    per = state_bytes_per_parameter(adapter, dtype, distributed)
    return per.weights + (per.gradients + per.optimizer if adapter == "full" else 0.0)


def _num(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def render_state_tables() -> str:
    """The generated Markdown of lora-qlora.md: bytes per parameter, then GiB by model size."""
    out = [
        "Bytes per parameter as `finetune memory` counts them (weights; then, per trained parameter, its "
        "gradient and AdamW state; LoRA/QLoRA train only the adapter, whose figures are per adapter "
        "parameter).",
        "",
        "| setup | weights | gradients | AdamW state | per model parameter |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, adapter, dtype, dist in STATE_ROWS:
        per = state_bytes_per_parameter(adapter, dtype, dist)
        trained = "" if adapter == "full" else " per adapter parameter"
        out.append(f"| {label} | {_num(per.weights)} | {_num(per.gradients)}{trained} | {_num(per.optimizer)}{trained} "
                   f"| {_num(state_bytes_total(adapter, dtype, dist))} |")
    out += [
        "",
        "Weights, gradients and optimizer state in GiB by model size (add activations, the adapter, and for "
        "GRPO the reference model and the rollouts):",
        "",
        "| model size | " + " | ".join(label for label, *_ in STATE_ROWS) + " |",
        "| --- | " + " | ".join("---:" for _ in STATE_ROWS) + " |",
    ]
    for size in SIZES_B:
        cells = [f"{size * 1e9 * state_bytes_total(a, d, z) / GIB:.1f}" for _, a, d, z in STATE_ROWS]
        out.append(f"| {size:g}B | " + " | ".join(cells) + " |")
    return "\n".join(out)


GENERATED: dict[Path, Callable[[], str]] = {PAGE: render_tables, BYTES_PAGE: render_state_tables}


def updated_page(text: str, page: Path = PAGE) -> str:
    """The page with its generated block replaced."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"{page} lacks the generated-block markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{GENERATED[page]()}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true")
    group.add_argument("--check", action="store_true")
    ns = parser.parse_args(argv)
    stale = 0
    for page in GENERATED:
        text = page.read_text()
        new = updated_page(text, page)
        if ns.write:
            page.write_text(new)
        elif new != text:
            print(f"{page} is out of date: run python -m llm_finetuning.memory.docgen --write", file=sys.stderr)
            stale = 1
    return stale


if __name__ == "__main__":
    sys.exit(main())
