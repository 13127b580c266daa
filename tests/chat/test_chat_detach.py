"""The real Claude Code client launches a run detached through its Bash tool: the tool call comes back at
once with the pid and the commands that watch the run, the chat ends, and the run trains on to its end
(the tiny random model on CPU, behind the plugin's real launch guard)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from messages_server import Text, ToolCall

from llm_finetuning import locations
from llm_finetuning.gate.protection import REGISTRY_DIR_NAME, registry_path
from llm_finetuning.rundir import LAUNCH_EXIT, LAUNCH_LOG, LAUNCH_PID

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launch"))
from launch_cases import copy_model, make_brief  # noqa: E402

pytestmark = [pytest.mark.plugin, pytest.mark.slow]
OPT_OUT = ("protection:\n  required: false\n  reason: a detached run cannot outlive a sandboxed Bash call "
           "(docs/security.md); this tests the detach itself\n")


def left_open(chat: Any, brief: Path) -> None:
    """The person records, in their own terminal, that the brief's project runs without the sandbox: only then
    does the brief's opt-out count inside Claude Code (docs/security.md)."""
    project = locations.project_root(brief.parent)
    done = chat.finetune("protect", "--project", str(project), "--unprotected", "this tests the detach itself")
    assert done.returncode == 0, done.stderr
    chat.cleanups.append(project)


@pytest.fixture
def chat(chat: Any) -> Any:
    chat.cleanups = []
    yield chat
    for project in chat.cleanups:
        (locations.user_config_dir() / REGISTRY_DIR_NAME / registry_path(project).name).unlink(missing_ok=True)


def test_a_detached_launch_returns_within_the_bash_call_and_outlives_the_chat(chat: Any, tiny_model_dir: Path) -> None:
    model = copy_model(tiny_model_dir, chat.project / "tiny")
    brief = make_brief(chat.project / "b", model, max_steps=12, extra=OPT_OUT)
    left_open(chat, brief)
    assert chat.finetune("render", str(brief), "-o", "run").returncode == 0
    run = chat.project / "run"

    result = chat.run("Launch the rendered run in ./run and tell me how it goes.", main=[
        ToolCall("Bash", {"command": "finetune launch run --detach", "description": "Launch the run detached"}),
        ToolCall("Bash", {"command": "finetune status run --json", "description": "The run's state"}),
        Text("It is training in the background."),
    ], timeout=120)
    assert result.returncode == 0, result.describe()
    launch, status = result.transcript.calls_to("Bash")
    pid = json.loads((run / LAUNCH_PID).read_text())["pid"]
    assert f"started in the background, pid {pid}" in (launch.result or ""), result.describe()
    assert "finetune diagnose" in (launch.result or "") and "--follow --timeout 240" in (launch.result or "")
    seen = json.loads(status.result or "{}")
    assert seen["state"] == "running" and seen["pid"] == pid, result.describe()  # the chat ended; the run had not

    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not (run / LAUNCH_EXIT).is_file():
        time.sleep(0.5)
    final = subprocess.run([sys.executable, "-m", "llm_finetuning.cli", "status", str(run), "--json"],
                           capture_output=True, text=True, timeout=60)
    state = json.loads(final.stdout)
    assert (state["state"], state["step"], final.returncode) == ("finished", 12, 0), (run / LAUNCH_LOG).read_text()


def test_the_model_polls_status_until_the_run_finishes_and_an_edited_run_is_denied(chat: Any,
                                                                                  tiny_model_dir: Path) -> None:
    from messages_server import Repeat, Request

    model = copy_model(tiny_model_dir, chat.project / "tiny")
    brief = make_brief(chat.project / "b", model, max_steps=6, extra=OPT_OUT)
    left_open(chat, brief)
    assert chat.finetune("render", str(brief), "-o", "run").returncode == 0
    assert chat.finetune("render", str(brief), "-o", "edited").returncode == 0
    config = chat.project / "edited" / "grpo_config.yaml"
    config.write_text(config.read_text() + "# a hand edit after rendering\n")

    def finished(request: Request) -> bool:
        return '"state": "finished"' in request.last_tool_result()

    poll = ToolCall("Bash", {"command": "sleep 3; finetune status run --json", "description": "Poll the run"})
    result = chat.run("Launch ./run and watch it to the end.", main=[
        ToolCall("Bash", {"command": "finetune launch edited --detach", "description": "Launch the edited run"}),
        ToolCall("Bash", {"command": "finetune launch run --detach", "description": "Launch the rendered run"}),
        Repeat(poll, finished, times=60),
        Text("The run finished."),
    ], timeout=400)
    assert result.returncode == 0, result.describe()
    edited, launch, *polls = result.transcript.calls_to("Bash")
    assert edited.is_error and "grpo_config.yaml was edited or removed after rendering" in edited.denial_reason
    assert not (chat.project / "edited" / LAUNCH_PID).exists()
    assert "started in the background" in (launch.result or ""), result.describe()
    states = [json.loads(p.result or "{}").get("state") for p in polls]
    assert states[-1] == "finished" and "running" in states[:-1], states
    final = json.loads(polls[-1].result or "{}")
    assert final["step"] == final["max_steps"] == 6 and final["reward"] is not None, final
