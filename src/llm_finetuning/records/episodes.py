"""An episode of a tool-use brief as a person reads it: each turn, each tool call with its arguments and
its result, and the final answer (the inspection report, `finetune review`). Pure."""

from __future__ import annotations

import json
from typing import Any


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _content(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in value)
    return "" if value is None else str(value)


def episode_summary(episode: dict[str, Any]) -> str:
    """One line: turns, tool calls, failed calls, and whether the turn limit cut it."""
    turns, calls, failed = episode.get("turns", 0), episode.get("tool_calls", 0), episode.get("tool_failures", 0)
    cut = ", cut at the turn limit" if episode.get("cut_at_limit") else ""
    return f"{turns} turn(s), {calls} tool call(s), {failed} failed{cut}"


def episode_transcript(episode: dict[str, Any]) -> str:
    """The episode's messages as plain text, one block per turn, the final answer last."""
    lines: list[str] = []
    turn = 0
    messages = [m for m in episode.get("messages") or [] if isinstance(m, dict)]
    for m in messages:
        if m.get("role") == "tool":
            lines.append(f"  <- {m.get('name', '?')} returned: {_content(m.get('content'))}")
            continue
        turn += 1
        text = _content(m.get("content")).strip()
        calls = m.get("tool_calls") or []
        lines.append(f"[turn {turn}] model" + (f": {text}" if text else ""))
        for call in calls:
            fn = call.get("function", call) if isinstance(call, dict) else {}
            lines.append(f"  -> calls {fn.get('name', '?')}({_arguments(fn.get('arguments', {}))})")
    final = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    answer = _content(final.get("content")).strip() if final and not final.get("tool_calls") else ""
    lines.append(f"[final answer] {answer}" if answer else "[final answer] (none: the episode ended on a tool call)")
    env = episode.get("environment")
    if isinstance(env, dict):
        lines.append(f"[environment] {env.get('name')}.get_reward() = {env.get('reward')}")
    return "\n".join(lines)


def completion_view(sample: dict[str, Any]) -> tuple[str, str]:
    """(label, text) of what a sample's model wrote: its episode when it has one, else its completion."""
    episode = sample.get("episode")
    if isinstance(episode, dict):
        return f"Episode ({episode_summary(episode)})", episode_transcript(episode)
    return "Completion", str(sample.get("completion", ""))
