"""Sampling with transformers `generate`: batched, on the GPU when one is visible, else the CPU.

Each batch holds whole groups (k completions of a prompt, through `num_return_sequences`) and is
seeded with `seed + index of its first prompt`, so a run is reproducible for the same settings and
batch size. On the CPU the model computes in float32 (bfloat16 matmuls are slow there and change
nothing about what the baseline measures); on a GPU it uses the brief's `model.dtype`.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from llm_finetuning.cputhreads import size_torch_threads
from llm_finetuning.jsonvalue import JsonValue
from llm_finetuning.sampling.backend import ChatMessage, Completion, SamplingSettings
from llm_finetuning.sampling.chat import eos_token_ids, render_prompt
from llm_finetuning.sampling.progress import SamplingProgress

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from llm_finetuning.models import CausalLM, ResolvedModel

# Sequences generated per forward batch (k per prompt); a GPU takes far larger batches than a CPU.
CPU_BATCH_SEQUENCES = 32
GPU_BATCH_SEQUENCES = 256


def decoding_kwargs(settings: SamplingSettings) -> dict[str, bool | float | None]:
    """`generate`'s decoding arguments: sampling as GRPO samples (top-k off), or greedy.

    Greedy unsets every sampling knob, so a model's own generation_config (temperature 0.7, top_k 50 ...)
    neither applies nor draws "flags not valid" warnings (top_k 0 would).
    """
    if settings.greedy:
        return {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    return {"do_sample": True, "temperature": settings.temperature, "top_p": settings.top_p, "top_k": 0}


class TransformersBackend:
    name = "transformers"

    def __init__(self, resolved: ResolvedModel, dtype: str = "bfloat16", device: str | None = None,
                 batch_sequences: int | None = None) -> None:
        import torch

        from llm_finetuning.models import load_model, load_tokenizer

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if self.device == "cpu":
            size_torch_threads(torch, "Sampling")
        self.dtype = dtype if self.device != "cpu" else "float32"
        print(f"Loading {resolved.display} ({self.dtype}, {self.device})...", file=sys.stderr, flush=True)
        self._use(load_model(resolved, self.dtype, self.device), load_tokenizer(resolved), batch_sequences)

    @classmethod
    def for_loaded(cls, model: CausalLM, tokenizer: PreTrainedTokenizerBase, device: str, batch_sequences: int | None = None) -> TransformersBackend:
        """A backend around a model already in memory (the policy while it trains): nothing is loaded."""
        backend = cls.__new__(cls)
        backend.device = device
        backend.dtype = str(getattr(model, "dtype", "")).replace("torch.", "")
        backend._use(model, tokenizer, batch_sequences)
        return backend

    def _use(self, model: CausalLM, tokenizer: PreTrainedTokenizerBase, batch_sequences: int | None) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.eos_ids = eos_token_ids(self.tokenizer, self.model.generation_config)
        env_batch = os.environ.get("LLM_FINETUNING_SAMPLING_BATCH")
        self.batch_sequences = batch_sequences or (int(env_batch) if env_batch else None) or (
            GPU_BATCH_SEQUENCES if self.device != "cpu" else CPU_BATCH_SEQUENCES)

    def describe(self) -> dict[str, JsonValue]:
        import torch

        return {"backend": self.name, "device": self.device, "dtype": self.dtype,
                "batch_sequences": self.batch_sequences,
                **({"cpu_threads": torch.get_num_threads()} if self.device == "cpu" else {})}

    def generate(self, conversations: list[list[ChatMessage]], settings: SamplingSettings,
                 progress: SamplingProgress) -> list[list[Completion]]:
        import torch

        tok = self.tokenizer
        texts = [render_prompt(tok, m, settings.chat_template_kwargs) for m in conversations]
        prompts_per_batch = max(1, self.batch_sequences // settings.k)
        results: list[list[Completion]] = []
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else (self.eos_ids[0] if self.eos_ids else 0)
        for start in range(0, len(texts), prompts_per_batch):
            chunk = texts[start:start + prompts_per_batch]
            enc_kwargs: dict[str, str | bool | int] = {"return_tensors": "pt", "padding": True,
                                                       "add_special_tokens": False}
            if settings.max_prompt_length:
                enc_kwargs.update(truncation=True, max_length=settings.max_prompt_length)
            tok.padding_side = "left"
            tok.truncation_side = "left"
            enc = tok(chunk, **enc_kwargs).to(self.device)
            torch.manual_seed(settings.seed + start)
            with torch.no_grad():
                out = self.model.generate(
                    **enc, **decoding_kwargs(settings),
                    max_new_tokens=settings.max_completion_length, num_return_sequences=settings.k,
                    eos_token_id=self.eos_ids or None, pad_token_id=pad_id,
                )
            new_tokens = out[:, enc["input_ids"].shape[1]:].tolist()
            for p in range(len(chunk)):
                group = []
                for j in range(settings.k):
                    ids = new_tokens[p * settings.k + j]
                    end = next((i for i, t in enumerate(ids) if t in self.eos_ids), None)
                    kept = ids if end is None else ids[:end]
                    group.append(Completion(
                        prompt_index=start + p, sample_index=j,
                        text=_decoded(tok, kept),
                        truncated=end is None and len(ids) >= settings.max_completion_length,
                        num_tokens=len(kept) + (0 if end is None else 1),
                    ))
                results.append(group)
            progress.advance(len(chunk), len(chunk) * settings.k)
        return results

    def generate_ids(self, batch: list[list[int]], max_new_tokens: int, settings: SamplingSettings,
                     seed: int) -> list[tuple[list[int], bool]]:
        """One continuation of each token-id sequence (an episode's next turn): (new ids up to and
        including EOS, whether it ended on EOS). Left-padded batches of `batch_sequences`, seeded."""
        import torch

        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else (
            self.eos_ids[0] if self.eos_ids else 0)
        out: list[tuple[list[int], bool]] = []
        for start in range(0, len(batch), self.batch_sequences):
            chunk = batch[start:start + self.batch_sequences]
            width = max(len(ids) for ids in chunk)
            input_ids = torch.tensor([[pad_id] * (width - len(ids)) + ids for ids in chunk], device=self.device)
            mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in chunk], device=self.device)
            torch.manual_seed(seed + start)
            with torch.no_grad():
                generated = self.model.generate(
                    input_ids=input_ids, attention_mask=mask, **decoding_kwargs(settings),
                    max_new_tokens=max_new_tokens, eos_token_id=self.eos_ids or None, pad_token_id=pad_id)
            for ids in generated[:, width:].tolist():
                end = next((i for i, t in enumerate(ids) if t in self.eos_ids), None)
                out.append((ids if end is None else ids[:end + 1], end is not None))
        return out


def _decoded(tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> str:
    """One sequence's text without special tokens (`decode` types a batch's list of texts too)."""
    text = tokenizer.decode(ids, skip_special_tokens=True)
    if not isinstance(text, str):
        raise TypeError(f"decode of one sequence returned {type(text).__name__}")
    return text
