"""The plugin's command in the real Claude Code client (`claude -p`, this checkout loaded with
--plugin-dir), driven by a canned model: what the command expands to, and what its `allowed-tools`
pre-approve (the brief search and the verbs it runs) and what they do not."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from canned_model import ToolCall, canned_model, client_env, tool_results, user_text

REPO = Path(__file__).resolve().parents[2]


def results_so_far(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)
               and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in m["content"]))


def run_command(claude_bin: Path, tmp_path: Path, prompt: str, calls: list[ToolCall]) -> tuple[dict[str, Any], Any]:
    """Run `claude -p PROMPT` in a project holding examples/code-tests; the model makes `calls` in order,
    then answers "done". Returns the client's JSON result and the canned model (its requests)."""
    project = tmp_path / "project"
    shutil.copytree(REPO / "examples/code-tests", project)

    def answer(body: dict[str, Any]) -> str | ToolCall:
        n = results_so_far(body)
        return calls[n] if n < len(calls) else "done"

    # `finetune` on PATH (this Python's, else the plugin's bin/ launcher), this checkout's package on PYTHONPATH
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    with canned_model(answer) as model:
        env = client_env(tmp_path / "home", model.url, PATH=path, PYTHONPATH=str(REPO / "src"))
        done = subprocess.run([str(claude_bin), "-p", prompt, "--plugin-dir", str(REPO), "--output-format", "json"],
                              cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), model


def test_namespaced_command_expands_and_runs_its_preapproved_verbs(claude_bin: Path, tmp_path: Path) -> None:
    calls = [ToolCall("Bash", {"command": "grep -rlE --include='*.yaml' '^brief: *1 *$' .", "description": "briefs"}),
             ToolCall("Bash", {"command": "finetune gate brief.yaml", "description": "gate"}),
             ToolCall("Bash", {"command": "finetune check brief.yaml", "description": "not pre-approved"})]
    result, model = run_command(claude_bin, tmp_path, "/llm-finetuning:finetune brief.yaml", calls)
    first = user_text(model.requests[0])
    assert "<command-name>/llm-finetuning:finetune</command-name>" in json.dumps(model.requests[0])
    assert "The argument is `brief.yaml`. If it is empty" in first
    assert "finetune launch RUN_DIR --detach" in first
    briefs, gate, check = (tool_results(model.requests[i])[0] for i in (1, 2, 3))
    assert "brief.yaml" in briefs and "approval" not in briefs
    assert "FAIL  base_success_nonzero" in gate and "gate: rejected" in gate  # ran: exit 1 with every check
    assert "requires approval" in check  # a verb the command does not list is not pre-approved
    assert [d["tool_input"]["command"] for d in result["permission_denials"]] == ["finetune check brief.yaml"]


def test_command_without_an_argument_asks_for_a_brief(claude_bin: Path, tmp_path: Path) -> None:
    _, model = run_command(claude_bin, tmp_path, "/llm-finetuning:finetune", [])
    first = user_text(model.requests[0])
    assert "The argument is ``. If it is empty, list the briefs" in first
    assert "and ask which one" in first
