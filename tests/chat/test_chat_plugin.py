"""The plugin driven through the real Claude Code client, turn by turn, by a scripted model: what the
client sent back to the model after each step is what these tests assert."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness import (
    AGENT,
    AGENT_TYPE,
    BROKER_PREFIX,
    BROKER_SERVER,
    DEFAULT_TOOLS,
    REPO,
    Chat,
    both_clients,
    broker,
)
from messages_server import Request, Text, ToolCall, result_text

pytestmark = pytest.mark.plugin

COMMAND = REPO / "commands" / "finetune.md"
AGENT_FILE = REPO / "agents" / f"{AGENT}.md"
GUARD = REPO / "hooks" / "guard"


def frontmatter_and_body(path: Path) -> tuple[dict[str, str], str]:
    """A Markdown file's `key: value` frontmatter and its body (what the client sends the model)."""
    _, head, body = path.read_text().split("---\n", 2)
    fields = dict(line.split(":", 1) for line in head.splitlines() if ":" in line)
    return {k.strip(): v.strip() for k, v in fields.items()}, body


def expanded_command(arguments: str) -> str:
    """The plugin command's text as the model must receive it for `/llm-finetuning:finetune ARGUMENTS`."""
    return frontmatter_and_body(COMMAND)[1].replace("$ARGUMENTS", arguments).strip()


@both_clients
def test_plugin_command_expands_with_its_argument(chat: Chat) -> None:
    chat.add_example("math-exact")
    result = chat.run("/llm-finetuning:finetune brief.yaml", [Text("Read the command.")])

    assert result.returncode == 0, result.stderr
    sent = result.transcript.user_text()
    assert "<command-name>/llm-finetuning:finetune</command-name>" in sent
    assert "<command-args>brief.yaml</command-args>" in sent
    assert expanded_command("brief.yaml") in sent
    assert "$ARGUMENTS" not in sent
    assert "Read the command." in result.stdout


def test_refused_gate_reaches_the_model_with_every_failed_check_and_its_fix(chat: Chat) -> None:
    chat.add_example("math-exact")  # shipped without its baseline and inspection records
    direct = chat.finetune("gate", "brief.yaml", "--json")
    assert direct.returncode == 1, direct.stdout + direct.stderr
    failed = [check for check in json.loads(direct.stdout)["checks"] if check["verdict"] == "fail"]
    assert {check["id"] for check in failed} >= {"base_success_nonzero", "reward_inspected"}

    def summarise(request: Request) -> Text:  # the next step depends on what came back
        ids = [check["id"] for check in failed if check["id"] in request.last_tool_result()]
        return Text("The gate refused the brief: " + ", ".join(ids))

    result = chat.run("/llm-finetuning:finetune brief.yaml",
                      [ToolCall("Bash", {"command": "finetune gate brief.yaml", "description": "Phase 1 gate"}),
                       summarise])

    [gate] = result.transcript.calls_to("Bash")
    assert gate.result is not None and gate.is_error, gate
    assert "Exit code 1" in gate.result
    for check in failed:
        assert f"FAIL  {check['id']}" in gate.result
        assert check["fix"] in gate.result, f"the fix for {check['id']} did not reach the model"
    assert "The gate refused the brief: " + ", ".join(c["id"] for c in failed) in result.stdout
    assert not (chat.project / "records").exists()


def guard_reason(command: str, cwd: Path) -> str:
    """The launch guard's own reason for denying `command`, asked directly with the client's hook input."""
    event = {"session_id": "s", "transcript_path": "/dev/null", "cwd": str(cwd), "permission_mode": "default",
             "hook_event_name": "PreToolUse", "tool_name": "Bash",
             "tool_input": {"command": command, "description": "launch"}, "tool_use_id": "toolu_1"}
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(["sh", str(GUARD)], input=json.dumps(event), capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=60, check=True)
    return str(json.loads(done.stdout)["hookSpecificOutput"]["permissionDecisionReason"])


@both_clients
def test_launch_guard_denies_an_unrendered_run_and_the_model_hears_why(chat: Chat) -> None:
    chat.add_example("math-exact")
    (chat.project / "runs" / "run-1").mkdir(parents=True)  # a folder, but never rendered by a passing gate
    launch = "finetune launch runs/run-1"
    result = chat.run("/llm-finetuning:finetune brief.yaml",
                      [ToolCall("Bash", {"command": launch, "description": "Launch the run"}),
                       Text("The launch was denied.")])

    [call] = result.transcript.calls_to("Bash")
    assert call.is_error, call
    reason = call.denial_reason  # 2.1.332 prefixes it with "PreToolUse:Bash hook error: "; 2.1.197 did not
    assert reason == guard_reason(launch, chat.project)
    assert "runs/run-1" in reason and "manifest.json" in reason and "finetune render" in reason
    assert not (chat.project / "runs" / "run-1" / "metrics.jsonl").exists()


def test_training_engineer_agent_runs_with_its_own_prompt_and_only_its_tools(chat: Chat) -> None:
    chat.add_example("math-exact")
    fields, body = frontmatter_and_body(AGENT_FILE)
    marker = body.strip().splitlines()[0]  # the body's first line, as it appears in the agent's system prompt
    agent_steps = [ToolCall("Bash", {"command": "finetune check brief.yaml", "description": "Check the brief"}),
                   broker("check", brief="brief.yaml"),
                   lambda request: Text("Agent report: " + next(  # check's verdict line, after any note
                       line for line in result_text(request.tool_results()[-2]).splitlines()
                       if line.startswith("brief.yaml:")))]
    result = chat.run("Train on brief.yaml",
                      [ToolCall("Agent", {"description": "Gate and train", "subagent_type": AGENT_TYPE,
                                          "prompt": "Run brief.yaml through the Phase 1 gate."}),
                       Text("Waiting for the training engineer.")],
                      agents={AGENT: (marker, agent_steps)}, timeout=90,
                      allowed_tools=f"{DEFAULT_TOOLS},{BROKER_SERVER}")  # the person allows the broker's tools

    role = f"agent:{AGENT}"
    transcript = result.transcript
    assert transcript.of(role), f"the {AGENT_TYPE} agent never called the model"
    for system in transcript.system_prompts(role):
        assert body.strip() in system
    main_tools = set(transcript.tool_lists("main")[0])
    declared = {name.strip() for name in fields["tools"].split(",")}
    for tools in transcript.tool_lists(role):
        # only the frontmatter's tools, as far as this client has them (Glob and Grep are not separate tools); the
        # broker's MCP tools are deferred: a placeholder stands for them until they are loaded
        builtin = {t for t in tools if not t.startswith(BROKER_PREFIX)} - {"DeferredToolPlaceholder"}
        assert builtin == declared & main_tools and set(tools) - builtin <= declared | {"DeferredToolPlaceholder"}
    assert {t for t in declared if t.startswith(BROKER_PREFIX)}  # the broker's tools, called below
    assert "Run brief.yaml through the Phase 1 gate." in transcript.user_text(role)
    [check] = transcript.calls_to("Bash", role)
    assert check.result is not None and "valid brief 'math-exact'" in check.result
    [brokered] = transcript.calls_to(BROKER_PREFIX + "check", role)  # the agent reaches the broker's tools
    assert json.loads(brokered.result or "{}")["result"]["name"] == "math-exact", brokered
    # the main loop heard the agent's final report
    assert "Agent report: brief.yaml: valid brief 'math-exact'" in transcript.everything_sent("main")
