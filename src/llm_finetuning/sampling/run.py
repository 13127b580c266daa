"""Sample a brief's model on a brief's prompts and score every completion with the brief's rewards.

The one path shared by `finetune baseline` and `finetune inspect`: resolve the model (dequantising a
GGUF once), build the chat messages with `data.system_prompt`, generate k completions per prompt at
`grpo.temperature` and `grpo.max_completion_length` on the chosen backend with a progress bar on
stderr, then score each completion with `llm_finetuning.rewards.score_rows`.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from llm_finetuning.brief.columns import require_columns
from llm_finetuning.sampling.backend import (
    Completion,
    SamplingSettings,
    choose_backend,
    cuda_available,
    make_backend,
    vllm_installed,
)
from llm_finetuning.sampling.data import DataSplit, build_messages, load_split, pick_indices
from llm_finetuning.sampling.progress import SamplingProgress


@dataclass
class SampledPrompt:
    """One prompt of the split with its k completions and, once scored, each completion's rewards."""

    row_index: int
    row: dict[str, Any]
    messages: list[dict[str, str]]
    completions: list[Completion]
    scores: list[dict[str, Any]] = field(default_factory=list)  # {"rewards": {name: v}, "total": v}


@dataclass
class SamplingRun:
    split: DataSplit
    prompts: list[SampledPrompt]
    settings: SamplingSettings
    model_identity: str
    backend: dict[str, Any]
    seconds: float
    tokenizer: Any = None


def settings_from_brief(brief: Any, k: int, seed_offset: int = 0,
                        max_completion_length: int | None = None) -> SamplingSettings:
    grpo = brief.section("grpo")
    return SamplingSettings(
        k=k,
        temperature=float(grpo.get("temperature", 1.0)),
        max_completion_length=int(max_completion_length or grpo.get("max_completion_length", 512)),
        max_prompt_length=grpo.get("max_prompt_length"),
        seed=int(grpo.get("seed", 0)) + seed_offset,
        chat_template_kwargs=dict(brief.section("data").get("chat_template_kwargs") or {}),
    )


def sample_brief(brief: Any, *, n_prompts: int, k: int, split: str = "auto", backend: str = "auto",
                 endpoint: str | None = None, endpoint_model: str | None = None, seed_offset: int = 0,
                 desc: str = "Sampling") -> SamplingRun:
    """k completions for each of `n_prompts` prompts of the split (spread over it, seeded)."""
    from llm_finetuning.models import model_identity, resolve_model

    chosen = choose_backend(backend, endpoint, vllm_installed(), cuda_available() if not endpoint else False)
    data_split = load_split(brief, split)
    require_columns(brief.section("data"), brief.data["rewards"], data_split.rows,
                    f"{data_split.yaml_path} ({data_split.source})")
    settings = settings_from_brief(brief, k, seed_offset)
    model_section = brief.section("model")
    system_prompt = brief.section("data").get("system_prompt")
    field_name = str(brief.section("data").get("prompt_field") or "prompt")
    indices = pick_indices(len(data_split.rows), n_prompts, settings.seed)
    prompts = [SampledPrompt(i, data_split.rows[i], build_messages(data_split.rows[i][field_name], system_prompt),
                             []) for i in indices]
    if chosen == "endpoint":
        identity = model_identity(model_section, brief.folder)
        engine = make_backend(chosen, None, str(model_section.get("dtype", "bfloat16")), endpoint, endpoint_model)
    else:
        resolved = resolve_model(model_section, brief.folder)
        identity = resolved.identity
        engine = make_backend(chosen, resolved, str(model_section.get("dtype", "bfloat16")))
    started = time.monotonic()
    with SamplingProgress(len(prompts), k, desc=desc) as bar:
        groups = engine.generate([p.messages for p in prompts], settings, bar)
    seconds = time.monotonic() - started
    for p, group in zip(prompts, groups, strict=True):
        p.completions = group
    return SamplingRun(data_split, prompts, settings, identity, engine.describe(), seconds,
                       getattr(engine, "tokenizer", None))


def score_run(brief: Any, run: SamplingRun) -> None:
    """Score every completion of `run` in place with every reward of the brief (bar on stderr)."""
    from tqdm import tqdm

    from llm_finetuning.rewards import score_rows

    field_name = str(brief.section("data").get("prompt_field") or "prompt")
    rows = []
    for p in run.prompts:
        for c in p.completions:
            row = dict(p.row)
            row["prompt"] = p.row[field_name]
            row["completion"] = c.text
            rows.append(row)
    kwargs: dict[str, Any] = {}
    if run.tokenizer is not None:
        kwargs["tokenizer"] = run.tokenizer
    with tqdm(total=len(rows), desc="Scoring", unit="completion", file=sys.stderr, dynamic_ncols=True,
              mininterval=0.5) as bar:
        scored = score_rows(brief, rows, progress=bar.update, **kwargs)
    it = iter(scored)
    for p in run.prompts:
        p.scores = [{"rewards": s["rewards"], "total": s["total"]} for _, s in zip(p.completions, it, strict=False)]
