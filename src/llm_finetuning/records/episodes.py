"""An episode of a tool-use brief as a person reads it: each turn, each tool call with its arguments and
its result, and the final answer (the inspection report, `finetune review`). Pure."""

from __future__ import annotations

import json
import re

from llm_finetuning.jsonvalue import JsonObject, JsonValue


def _arguments(value: JsonValue) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _items(value: JsonValue) -> list[JsonObject]:
    """The objects of a JSON list (messages, tool calls); [] for anything else."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _content(value: JsonValue) -> str:
    if isinstance(value, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in value)
    return "" if value is None else str(value)


def episode_summary(episode: JsonObject) -> str:
    """One line: turns, tool calls, failed calls, and whether the turn limit cut it."""
    turns, calls, failed = episode.get("turns", 0), episode.get("tool_calls", 0), episode.get("tool_failures", 0)
    cut = ", cut at the turn limit" if episode.get("cut_at_limit") else ""
    return f"{turns} turn(s), {calls} tool call(s), {failed} failed{cut}"


def episode_transcript(episode: JsonObject) -> str:
    """The episode's messages as plain text, one block per turn, the final answer last."""
    lines: list[str] = []
    turn = 0
    messages = _items(episode.get("messages"))
    for m in messages:
        if m.get("role") == "tool":
            lines.append(f"  <- {m.get('name', '?')} returned: {_content(m.get('content'))}")
            continue
        turn += 1
        text = _content(m.get("content")).strip()
        lines.append(f"[turn {turn}] model" + (f": {text}" if text else ""))
        calls = m.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            inner = call.get("function", call) if isinstance(call, dict) else {}
            fn = inner if isinstance(inner, dict) else {}
            lines.append(f"  -> calls {fn.get('name', '?')}({_arguments(fn.get('arguments', {}))})")
    final = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    answer = _content(final.get("content")).strip() if final and not final.get("tool_calls") else ""
    lines.append(f"[final answer] {answer}" if answer else "[final answer] (none: the episode ended on a tool call)")
    env = episode.get("environment")
    if isinstance(env, dict):
        lines.append(f"[environment] {env.get('name')}.get_reward() = {env.get('reward')}")
    return "\n".join(lines)


def completion_view(sample: JsonObject) -> tuple[str, str]:
    """(label, text) of what a sample's model wrote: its episode when it has one, else its completion."""
    episode = sample.get("episode")
    if isinstance(episode, dict):
        return f"Episode ({episode_summary(episode)})", episode_transcript(episode)
    return "Completion", str(sample.get("completion", ""))


# --- the review's screen: what a 24-line terminal holds --------------------------------------------------

SPECIAL_TOKEN = re.compile(r"<\|[^|<>\s]{1,40}\|>|</?tool_response>")  # chat-format tokens, tool-result tags
LINE = 76  # what a folded line keeps of its text on an 80-column terminal


def _cut(text: str, width: int = LINE) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= width else one[: width - 1] + "…"


def prompt_lines(prompt: JsonValue) -> list[str]:
    """A prompt folded for the review: the system prompt on one line, the worked episodes (the turns before the
    last user message) summarised on one line, then the last user message in full. A plain string as it is."""
    if not isinstance(prompt, list):
        return [prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False, default=str)]
    messages = [m for m in prompt if isinstance(m, dict)]
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users:
        return [json.dumps(prompt, ensure_ascii=False, default=str)]
    last = users[-1]
    lines = [f"[system, folded] {_cut(_content(m.get('content')), LINE - 17)}" for m in messages[:last]
             if m.get("role") == "system"]
    worked = [i for i in users if i < last]
    if worked:
        first = _cut(_content(messages[worked[0]].get("content")), 30)
        answers = [m for m in messages[worked[0]:last] if m.get("role") == "assistant" and not m.get("tool_calls")]
        shown = f" -> {_cut(_content(answers[0].get('content')), 12)}" if answers else ""
        lines.append(f"[{len(worked)} worked episode(s), folded: {first!r}{shown} ...]")
    lines.append(_content(messages[last].get("content")))
    return lines


def _schema_summary(schema: JsonValue) -> str:
    """A JSON schema of call arguments in a few words: `a in [57, 58], b in [57, 58]`."""
    if not isinstance(schema, dict):
        return _arguments(schema)
    props = schema.get("properties")
    if not isinstance(props, dict):
        return _cut(json.dumps(schema, ensure_ascii=False, default=str), 40)
    parts = []
    for name, sub in props.items():
        sub = sub if isinstance(sub, dict) else {}
        if "enum" in sub:
            parts.append(f"{name} in {_arguments(sub['enum'])}")
        elif "const" in sub:
            parts.append(f"{name} = {_arguments(sub['const'])}")
        else:
            parts.append(f"{name}: {sub.get('type', 'any')}")
    return ", ".join(parts)


def reference_lines(reference: JsonValue) -> list[str]:
    """The reference summarised, one line a field: expected calls as `name(argument constraints)`, any other
    value as compact JSON cut to the line (the inspection report keeps it whole)."""
    if not isinstance(reference, dict):
        return [_cut(reference if isinstance(reference, str) else json.dumps(reference, default=str))]
    lines = []
    for key, value in reference.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
            calls = "; ".join(f"{v.get('name')}({_schema_summary(v.get('arguments'))})" for v in _items(value))
            lines.append(_cut(f"{key}: {len(value)} call(s): {calls}"))
        else:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str,
                                                                   separators=(",", ":"))
            lines.append(_cut(f"{key}: {text}"))
    return lines


def special_tokens_in_turns(episode: JsonObject) -> list[str]:
    """`turn N: <|im_start|>, ...` for each model turn whose text holds raw chat-format tokens or tool-result
    tags: the model wrote the format itself (a made-up tool result, a new user turn), which no reward may see."""
    found, turn = [], 0
    for m in _items(episode.get("messages")):
        if m.get("role") == "tool":
            continue
        turn += 1
        tokens = list(dict.fromkeys(SPECIAL_TOKEN.findall(_content(m.get("content")))))
        if tokens:
            found.append(f"turn {turn}: {', '.join(tokens)}")
    return found
