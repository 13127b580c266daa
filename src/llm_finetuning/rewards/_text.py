"""Text helpers shared by the built-in rewards: message formats, think blocks, echoed prompts.

TRL hands rewards either plain strings (standard format) or lists of chat messages (conversational
format); every built-in reads both through `completion_text` and `prompt_text`. A data column arrives as
a keyword argument holding one value per completion (`column_values`). Pure stdlib.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TypeAlias, TypedDict, TypeGuard


class Message(TypedDict, total=False):
    """A chat message as TRL hands it to a reward and a data row holds it. Only `role` is sure to be text
    when present; `content` (a string, or a list of parts whose text parts are read) and an assistant's
    `tool_calls` are what the model or the data wrote, so every reader narrows them."""

    role: str
    content: object
    tool_calls: object


# A completion or a prompt: a string (standard format) or a list of chat messages (conversational format).
Completion: TypeAlias = str | list[Message]
Prompt: TypeAlias = str | list[Message]


def is_message(value: object) -> TypeGuard[Message]:
    """Whether `value` is a mapping with text keys whose `role`, when present, is text: a `Message`."""
    return isinstance(value, dict) and all(isinstance(k, str) for k in value) \
        and isinstance(value.get("role", ""), str)


def column_values(columns: Mapping[str, object], name: str) -> Sequence[object]:
    """The values of data column `name`, one per completion (TRL and `score_rows` pass each column as a list)."""
    values = columns[name]
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"column {name!r} holds {type(values).__name__}, not a list of one value per completion")
    return values


_THINK_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?(</\1>|\Z)", re.IGNORECASE | re.DOTALL)
_THINK_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.IGNORECASE)


def content_text(content: object) -> str:
    """The text of one message's content: a string, or a list of parts with type text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") == "text":
                parts.append(str(part.get("text", "")))
        return "".join(parts)
    return str(content)


def completion_text(completion: Completion | Message | None) -> str:
    """A completion as text: the string itself, or the assistant messages of a conversational one joined.

    An episode (messages that include tool results) is read for its final answer only: the last
    assistant message, so a reward never credits text the model wrote before a tool answered.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return content_text(completion.get("content"))
    if isinstance(completion, list):
        msgs = [m for m in completion if isinstance(m, dict)]
        assistant = [m for m in msgs if m.get("role", "assistant") == "assistant"]
        if any(m.get("role") == "tool" for m in msgs):
            return content_text(assistant[-1].get("content")) if assistant else ""
        return "\n".join(content_text(m.get("content")) for m in (assistant or msgs))
    return "" if completion is None else str(completion)


def prompt_text(prompt: Prompt | None) -> str:
    """A prompt as text: the string itself, or the content of its last user message."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        msgs = [m for m in prompt if isinstance(m, dict)]
        users = [m for m in msgs if m.get("role") == "user"]
        chosen = users[-1:] or msgs[-1:]
        return content_text(chosen[0].get("content")) if chosen else ""
    return "" if prompt is None else str(prompt)


def prompt_transcript(prompt: Prompt | None) -> str:
    """The whole prompt as readable text (a judge sees every message, not only the last one)."""
    if isinstance(prompt, list):
        return "\n".join(f"[{m.get('role', '?')}] {content_text(m.get('content'))}"
                         for m in prompt if isinstance(m, dict))
    return prompt_text(prompt)


def strip_think(text: str) -> str:
    """The text with every think block removed, so an answer inside the reasoning never counts.

    Text before a closing tag with no opening tag is reasoning too (chat templates often open the block
    inside the prompt); an opening tag that never closes hides everything after it.
    """
    closes = list(_THINK_CLOSE.finditer(text))
    if closes and not _THINK_OPEN.search(text[: closes[0].start()]):
        text = text[closes[0].end():]
    text = _THINK_BLOCK.sub(" ", text)
    return _THINK_CLOSE.sub(" ", text)


def remove_echo(text: str, prompt: str, min_chars: int = 12) -> str:
    """The text without verbatim copies of the prompt, so repeating a prompt that holds the answer earns nothing."""
    prompt = prompt.strip()
    if len(prompt) < min_chars:
        return text
    return text.replace(prompt, " ")
