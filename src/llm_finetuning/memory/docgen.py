"""Generate the sizing tables of references/grpo-memory.md from the estimator, and check them in CI.

    python -m llm_finetuning.memory.docgen --write   # rewrite the generated block
    python -m llm_finetuning.memory.docgen --check   # exit 1 when the page is out of date

Only the text between the BEGIN/END markers is generated; the prose around it is written by hand.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from llm_finetuning.memory.estimator import Settings, estimate
from llm_finetuning.memory.shapes import ModelShape, lookup

PAGE = Path(__file__).resolve().parents[3] / "references" / "grpo-memory.md"
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

# The recipe the tables assume (the brief's defaults, with a 1024-token completion budget).
BASE = Settings(
    adapter="full", dtype="bfloat16", gpus=1, gpu_memory_gib=80.0, num_generations=8, per_device_batch=8,
    gradient_accumulation_steps=4, max_completion_length=1024, prompt_tokens=512, beta=0.01,
    generation="transformers", gradient_checkpointing=True,
)


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
    out = [
        "Per-GPU peak in GiB (PyTorch peak reserved plus the CUDA context), and in brackets the smallest of "
        "24/48/80/141 GiB cards it fits. Recipe: G=8, per-device batch 8, gradient accumulation 4 "
        "(32 completions generated at once per GPU), prompt 512 + completion 1024 tokens, beta 0.01, "
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
        ("completion 2048 tokens", replace(BASE, max_completion_length=2048)),
        ("LoRA r16", replace(BASE, adapter="lora")),
        ("ZeRO-2 on 4 GPUs", replace(BASE, gpus=4, distributed="zero2")),
        ("ZeRO-3 on 4 GPUs", replace(BASE, gpus=4, distributed="zero3")),
    ]
    for label, s in changes:
        peak = estimate(shape, replace(s, gpu_memory_gib=141.0)).device_total_gib
        out.append(f"| {label} | {peak:.1f} | {peak - base:+.1f} |")
    return "\n".join(out)


def updated_page(text: str) -> str:
    """The page with its generated block replaced."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"{PAGE} lacks the generated-block markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{render_tables()}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true")
    group.add_argument("--check", action="store_true")
    ns = parser.parse_args(argv)
    text = PAGE.read_text()
    new = updated_page(text)
    if ns.write:
        PAGE.write_text(new)
        return 0
    if new != text:
        print(f"{PAGE} is out of date: run python -m llm_finetuning.memory.docgen --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
