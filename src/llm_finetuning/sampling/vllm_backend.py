"""Sampling with vLLM's offline engine (`vllm.LLM`) on a CUDA GPU.

Prompts are rendered with the model's own chat template (the same text the transformers backend and
GRPO training feed) and sent as token ids, left-truncated to max_prompt_length. Every prompt gets its
own `SamplingParams(seed=seed + prompt index)`, so results do not depend on how vLLM batches them.

Episodes continue token ids (`generate_ids`): each sequence is a `TokensPrompt` with its own
`SamplingParams(n=1, seed=...)`. Written against vLLM's documented API (`vllm.inputs.TokensPrompt`,
`CompletionOutput.token_ids` and `finish_reason`); vLLM cannot be installed where this was written, so
only `continuation_params_kwargs` is tested (docs/sampling.md, Episodes).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from llm_finetuning.jsonvalue import JsonValue
from llm_finetuning.sampling.backend import ChatMessage, Completion, SamplingSettings
from llm_finetuning.sampling.chat import render_prompt
from llm_finetuning.sampling.progress import SamplingProgress

if TYPE_CHECKING:
    from llm_finetuning.models import ResolvedModel

# Prompts handed to the engine per call: large enough to keep the GPU busy, small enough for a live bar.
PROMPTS_PER_CALL = 64
GPU_MEMORY_UTILIZATION = 0.85


def sampling_params_kwargs(settings: SamplingSettings, prompt_index: int) -> dict[str, int | float]:
    """The `vllm.SamplingParams` arguments for one prompt (pure, so it is tested without vLLM).

    top_k is left at vLLM's default (disabled), as in GRPO training; greedy is vLLM's temperature 0.
    """
    return {
        "n": settings.k,
        **settings.sampling_fields(),
        "max_tokens": settings.max_completion_length,
        "seed": settings.seed + prompt_index,
    }


def continuation_params_kwargs(settings: SamplingSettings, max_new_tokens: int, seed: int) -> dict[str, int | float]:
    """The `vllm.SamplingParams` arguments for one episode turn: one continuation of `max_new_tokens` at
    most, sampled as `sampling_params_kwargs` samples (greedy is temperature 0)."""
    return {
        "n": 1,
        **settings.sampling_fields(),
        "max_tokens": max_new_tokens,
        "seed": seed,
    }


class VllmBackend:
    name = "vllm"

    def __init__(self, resolved: ResolvedModel, dtype: str = "bfloat16") -> None:
        from vllm import LLM

        from llm_finetuning.models import load_tokenizer

        print(f"Loading {resolved.display} in vLLM ({dtype})...", file=sys.stderr, flush=True)
        self.tokenizer = load_tokenizer(resolved)
        self.dtype = dtype
        self.llm = LLM(model=resolved.path, revision=resolved.revision, dtype=dtype,
                       gpu_memory_utilization=GPU_MEMORY_UTILIZATION, seed=0)

    def describe(self) -> dict[str, JsonValue]:
        import vllm

        return {"backend": self.name, "device": "cuda", "dtype": self.dtype, "vllm_version": vllm.__version__}

    def generate(self, conversations: list[list[ChatMessage]], settings: SamplingSettings,
                 progress: SamplingProgress) -> list[list[Completion]]:
        from vllm import SamplingParams

        token_prompts = []
        for messages in conversations:
            ids = self.tokenizer(render_prompt(self.tokenizer, messages, settings.chat_template_kwargs), add_special_tokens=False)["input_ids"]
            if settings.max_prompt_length:
                ids = ids[-settings.max_prompt_length:]
            token_prompts.append({"prompt_token_ids": ids})
        results: list[list[Completion]] = []
        for start in range(0, len(token_prompts), PROMPTS_PER_CALL):
            chunk = token_prompts[start:start + PROMPTS_PER_CALL]
            params = [SamplingParams(**sampling_params_kwargs(settings, start + i)) for i in range(len(chunk))]
            outputs = self.llm.generate(chunk, params, use_tqdm=False)
            for i, request in enumerate(outputs):
                results.append([
                    Completion(prompt_index=start + i, sample_index=j, text=o.text,
                               truncated=o.finish_reason == "length", num_tokens=len(o.token_ids))
                    for j, o in enumerate(request.outputs)
                ])
            progress.advance(len(chunk), len(chunk) * settings.k)
        return results

    def generate_ids(self, batch: list[list[int]], max_new_tokens: int, settings: SamplingSettings,
                     seed: int) -> list[tuple[list[int], bool]]:
        """One continuation of each token-id sequence (an episode's next turn), `seed + position` each:
        (new ids, EOS included when it stopped on one; whether `finish_reason` is `stop`)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=list(ids)) for ids in batch]
        params = [SamplingParams(**continuation_params_kwargs(settings, max_new_tokens, seed + i))
                  for i in range(len(batch))]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        return [(list(request.outputs[0].token_ids), request.outputs[0].finish_reason == "stop")
                for request in outputs]
