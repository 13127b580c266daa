"""A bare `/finetune` with the real client: unknown until `finetune install-command` writes the project's
thin command; then it hands over to the plugin's command through the Skill tool."""

from __future__ import annotations

import pytest
from harness import DEFAULT_TOOLS, Chat, both_clients
from messages_server import Text, ToolCall, blocks
from test_chat_plugin import expanded_command
from transcript import Transcript

pytestmark = pytest.mark.plugin


def test_bare_finetune_is_unknown_without_the_project_command(chat: Chat) -> None:
    chat.add_example("math-exact")
    result = chat.run("/finetune brief.yaml", [Text("There is no /finetune here.")])

    assert result.returncode == 0, result.stderr
    sent = result.transcript.user_text()
    # Claude Code 2.1.332 tells the model; 2.1.197 answered "Unknown command: /finetune" without asking it
    assert "starts with the slash command /finetune, but no command with that name is available" in sent
    assert "/llm-finetuning:finetune" in sent
    assert expanded_command("brief.yaml") not in sent


def install_and_hand_over(chat: Chat, allowed_tools: str) -> Transcript:
    """`finetune install-command`, then `/finetune brief.yaml`: the model calls the Skill the thin command
    names, then the gate the plugin command asks for."""
    chat.add_example("math-exact")
    installed = chat.finetune("install-command")
    assert installed.returncode == 0, installed.stderr
    assert (chat.project / ".claude" / "commands" / "finetune.md").is_file()
    handover = ToolCall("Skill", {"skill": "llm-finetuning:finetune", "args": "brief.yaml"})
    gate = ToolCall("Bash", {"command": "finetune gate brief.yaml", "description": "Phase 1 gate"})
    result = chat.run("/finetune brief.yaml", [handover, gate, Text("Gate ran.")], allowed_tools=allowed_tools)
    assert result.returncode == 0, result.stderr
    return result.transcript


@both_clients
def test_bare_finetune_after_install_command_reaches_the_plugin_command(chat: Chat) -> None:
    transcript = install_and_hand_over(chat, DEFAULT_TOOLS)

    first = transcript.of("main")[0]
    said = "\n".join(b.get("text", "") for m in first.messages for b in blocks(m))
    assert "<command-name>/finetune</command-name>" in said
    assert 'Call the Skill tool with `skill: "llm-finetuning:finetune"` and `args: "brief.yaml"`' in said
    assert "- llm-finetuning:finetune: " in transcript.everything_sent()  # the Skill tool's listing names it

    [skill] = transcript.calls_to("Skill")
    assert skill.result == "Launching skill: llm-finetuning:finetune" and not skill.is_error
    assert expanded_command("brief.yaml") in transcript.user_text()  # the plugin command, with BRIEF in it
    [ran] = transcript.calls_to("Bash")
    assert ran.result is not None and "FAIL  reward_inspected" in ran.result, ran


def test_the_handover_carries_the_plugin_commands_allowed_tools(chat: Chat) -> None:
    # only Read on the command line: the thin command's `allowed-tools: Skill` lets the handover run, and
    # the plugin command's `Bash(finetune:*)` lets `finetune gate` run (2.1.332; 2.1.197 asked for approval)
    transcript = install_and_hand_over(chat, "Read")

    [skill] = transcript.calls_to("Skill")
    assert skill.result == "Launching skill: llm-finetuning:finetune"
    [ran] = transcript.calls_to("Bash")
    assert ran.result is not None and "FAIL  reward_inspected" in ran.result, ran
