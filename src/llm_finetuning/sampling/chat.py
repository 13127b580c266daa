"""Turning chat messages into the prompt text a local backend feeds the model."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict

from llm_finetuning.jsonvalue import JsonValue
from llm_finetuning.sampling.backend import ChatMessage

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

_warned = False


class TemplateIdentity(TypedDict):
    """Whether prompts went through a chat template (`"by the endpoint"` when a server applied its own), and
    the sha256 of its text when this side applied it."""

    applied: bool | str
    sha256: str | None


def chat_template_call(tokenizer: PreTrainedTokenizerBase) -> Callable[..., object]:
    """The tokenizer's `apply_chat_template`, taking the conversations training renders: transformers annotates
    a conversation as `list[dict[str, str]]`, which an assistant turn's `tool_calls` and a tool message's list of
    content blocks are not, though the template renders them (TRL passes the same messages)."""
    return tokenizer.apply_chat_template


def render_prompt(tokenizer: PreTrainedTokenizerBase, messages: Sequence[ChatMessage],
                  chat_template_kwargs: Mapping[str, JsonValue] | None = None) -> str:
    """The model's chat template with the generation prompt and the brief's `data.chat_template_kwargs`
    (Qwen3's `enable_thinking`, for instance), as GRPO training applies it.

    A tokenizer without a chat template (a base model) gets the contents joined by blank lines, with a
    one-time warning: such a model will rarely follow instructions, which the baseline will show.
    """
    global _warned
    if getattr(tokenizer, "chat_template", None):
        text = chat_template_call(tokenizer)(list(messages), add_generation_prompt=True, tokenize=False,
                                             **(chat_template_kwargs or {}))
        return str(text)
    if not _warned:
        print("warning: the model's tokenizer has no chat template; prompts are fed as plain text "
              "(use an instruct model, or SFT first)", file=sys.stderr)
        _warned = True
    return "\n\n".join(m["content"] for m in messages) + "\n\n"


def chat_template_identity(tokenizer: PreTrainedTokenizerBase) -> TemplateIdentity:
    """Whether prompts go through a chat template, and the sha256 of its text: bound into records, so a
    later comparison (`finetune eval`) can tell whether both sides were prompted the same way."""
    from llm_finetuning.fileio import sha256_bytes

    template: object = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # several named templates: the default one is what is applied
        template = template.get("default")
    if not template:
        return {"applied": False, "sha256": None}
    return {"applied": True, "sha256": sha256_bytes(str(template).encode("utf-8"))}


def eos_token_ids(tokenizer: PreTrainedTokenizerBase, generation_config: object = None) -> list[int]:
    """Every token id that ends a completion (the generation config's list and the tokenizer's EOS)."""
    ids: list[int] = []
    configured = getattr(generation_config, "eos_token_id", None) if generation_config is not None else None
    if isinstance(configured, int):
        ids.append(configured)
    elif isinstance(configured, (list, tuple)):
        ids.extend(int(i) for i in configured)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(int(tokenizer.eos_token_id))
    return ids
