"""What the real client sent the scripted model, read back as a conversation, and its Markdown rendering."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from messages_server import Request, ToolCall, blocks, result_text

DENIAL_PREFIX = "PreToolUse:"  # Claude Code 2.1.x: "PreToolUse:Bash hook error: <the hook's reason>"
GUARD_PREFIX = "llm-finetuning guard: "  # how the plugin's guard starts every reason it gives


@dataclass(frozen=True)
class ToolUse:
    """One tool call the model made, and what the client sent back for it (None: nothing came back)."""

    id: str
    name: str
    input: dict[str, Any]
    result: str | None
    is_error: bool
    role: str

    @property
    def denied_by_hook(self) -> bool:
        """The client said a PreToolUse hook stopped the call: 2.1.3xx prefixes a Bash denial's reason with
        "PreToolUse:Bash hook error: " and sends a file tool's denial as the bare reason, as 2.1.197 does for
        every tool; a bare reason is recognised by the guard's own prefix."""
        result = self.result or ""
        return result.startswith(DENIAL_PREFIX) or (self.is_error and result.startswith(GUARD_PREFIX))

    @property
    def denial_reason(self) -> str:
        """What came back without the client's "PreToolUse:Bash hook error: " prefix, when it has one."""
        result = self.result or ""
        head, _, reason = result.partition(": ")
        return reason if head.startswith(DENIAL_PREFIX) and " hook " in head else result


@dataclass
class Transcript:
    """Every request the client made, grouped by role: `main`, `agent:<name>`, `side`."""

    requests: list[Request]
    prompt: str = ""

    def of(self, role: str = "main") -> list[Request]:
        return [r for r in self.requests if r.role == role]

    @property
    def roles(self) -> list[str]:
        return list(dict.fromkeys(r.role for r in self.requests))

    def tool_calls(self, role: str = "main") -> list[ToolUse]:
        """The role's tool calls in order, each with the tool_result the client sent back."""
        calls: dict[str, tuple[str, dict[str, Any]]] = {}
        results: dict[str, tuple[str | None, bool]] = {}
        for request in self.of(role):
            for message in request.messages:
                for block in blocks(message):
                    if block.get("type") == "tool_use":
                        calls.setdefault(block["id"], (block["name"], dict(block.get("input") or {})))
                    elif block.get("type") == "tool_result":
                        results[block["tool_use_id"]] = (result_text(block), bool(block.get("is_error")))
        out = []
        for call_id, (name, args) in calls.items():
            result, is_error = results.get(call_id, (None, False))
            out.append(ToolUse(call_id, name, args, result, is_error, role))
        return out

    def calls_to(self, name: str, role: str = "main") -> list[ToolUse]:
        return [call for call in self.tool_calls(role) if call.name == name]

    def user_texts(self, role: str = "main") -> list[str]:
        """The text blocks of the user messages the role's newest request carries (tool results left out)."""
        requests = self.of(role)
        if not requests:
            return []
        return [block.get("text", "") for message in requests[-1].messages if message.get("role") == "user"
                for block in blocks(message) if block.get("type") == "text"]

    def user_text(self, role: str = "main") -> str:
        return "\n".join(self.user_texts(role))

    def system_prompts(self, role: str = "main") -> list[str]:
        return [r.system for r in self.of(role)]

    def tool_lists(self, role: str = "main") -> list[list[str]]:
        return [r.tool_names for r in self.of(role)]

    def everything_sent(self, role: str = "main") -> str:
        """The role's system prompts and messages as one string, for `in` checks."""
        return "\n".join(r.system + "\n" + json.dumps(r.messages, ensure_ascii=False) for r in self.of(role))


def _fence(text: str, limit: int) -> str:
    text = text.rstrip()
    if len(text) > limit:
        text = text[:limit].rstrip() + "\n..."
    return "```text\n" + text + "\n```"


def _call_line(call: ToolCall) -> str:
    if call.name == "Bash":
        return f"`{call.input.get('command', '')}`"
    if call.name == "Agent":
        return f"`{call.input.get('subagent_type', '')}`: {call.input.get('prompt', '')}"
    if call.name == "Skill":
        return f"`{call.input.get('skill', '')}` with `{call.input.get('args', '')}`"
    if "file_path" in call.input:
        return f"`{call.input['file_path']}`"
    return f"`{json.dumps(call.input, ensure_ascii=False)}`"


def _client_text(text: str) -> str | None:
    """A user text block the client added, in one line for the transcript, or None to leave it out."""
    command = re.search(r"<command-name>(.*?)</command-name>", text)
    if command:
        args = re.search(r"<command-args>(.*?)</command-args>", text, re.S)
        return f"*The client expands* `{command.group(1)}` *with arguments* `{args.group(1) if args else ''}`"
    if "<task-notification>" in text:
        result = re.search(r"<result>(.*?)</result>", text, re.S)
        said = result.group(1).strip() if result else "(no result)"
        return f"*The client reports the finished background agent:* {said}"
    if text.lstrip().startswith("<system-reminder>"):
        return None
    first = text.strip().splitlines()[0] if text.strip() else ""
    more = " ..." if len(text.strip().splitlines()) > 1 else ""
    return f"*The client sends the model:* {first}{more}"


def render_markdown(transcript: Transcript, role: str = "main", limit: int = 1200) -> str:
    """A short Markdown transcript: what was typed, what the client sent, each tool call and what came back
    (denials and their reasons), and what the scripted model said."""
    requests = transcript.of(role)
    typed = transcript.prompt if role == "main" else next(
        (t for t in transcript.user_texts(role) if not t.lstrip().startswith("<system-reminder>")), "")
    lines = [f"**Typed:** `{typed}`" if role == "main" else f"**Started with:** {typed}", ""]
    results = {call.id: call for call in transcript.tool_calls(role)}
    seen: set[str] = {typed}
    for request in requests:
        for message in request.messages:
            if message.get("role") != "user":
                continue
            for block in blocks(message):
                text = block.get("text", "")
                if block.get("type") != "text" or text in seen:
                    continue
                seen.add(text)
                line = _client_text(text)
                if line:
                    lines += [line, ""]
        reply = request.reply
        if isinstance(reply, ToolCall):
            if reply.text:
                lines += [f"**Model:** {reply.text}", ""]
            lines += [f"**Model calls {reply.name}:** {_call_line(reply)}", ""]
            call = results.get(request.tool_id)
            if call is None or call.result is None:
                lines.append("*(nothing came back)*")
            elif call.denied_by_hook:
                lines.append(f"**Denied before it ran** (PreToolUse hook): {call.denial_reason}")
            else:
                lines += ["*Came back (error):*" if call.is_error else "*Came back:*", "", _fence(call.result, limit)]
            lines.append("")
        elif reply is not None:
            lines += [f"**Model:** {reply.text}", ""]
    return "\n".join(lines).rstrip() + "\n"
