"""The whole workflow from the agent's chat in a protected project, through the plugin's broker (its MCP server,
docs/claude-code.md "The broker"), with the real Claude Code client and the tiny random model on CPU:
check, baseline and inspect as polled jobs; the person's review signed at a terminal; gate, render and a
detached launch; status from the broker and from the sandboxed Bash tool; the run finishing after the chat
ended; then status, diagnose and eval. Asserted on what the client sent back to the model."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness import BROKER_PREFIX, Chat, broker
from messages_server import Repeat, Request, Text, ToolCall

from llm_finetuning.rundir import LAUNCH_EXIT, LAUNCH_LOG

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS / "broker"), str(TESTS / "launch"), str(TESTS / "sampling")]

from broker_cases import tiny_vowel_brief  # noqa: E402
from launch_cases import copy_model  # noqa: E402
from ptydrive import PtyDriver  # noqa: E402

pytestmark = [pytest.mark.plugin, pytest.mark.slow]
RUN = "runs/run-1"


def answer(request: Request) -> dict[str, Any]:
    """The broker's JSON answer that came back for the last call."""
    return json.loads(request.last_tool_result() or "{}")


def polled(tool: str, **arguments: Any) -> list[Any]:
    """Call a long verb, then poll its job until it has finished."""
    def poll(request: Request) -> ToolCall:
        return broker("job", id=answer(request)["job"], wait_s=50)

    return [broker(tool, **arguments), Repeat(poll, lambda r: answer(r).get("state") == "finished", times=20)]


def results(chat_result: Any) -> dict[str, list[dict[str, Any]]]:
    """Every broker answer the client sent back, by tool."""
    out: dict[str, list[dict[str, Any]]] = {}
    for call in chat_result.transcript.tool_calls():
        if call.name.startswith(BROKER_PREFIX):
            out.setdefault(call.name.removeprefix(BROKER_PREFIX), []).append(json.loads(call.result or "{}"))
    return out


def review_at_a_terminal(chat: Chat, record: Path) -> None:
    """The person signs the inspection in their own terminal: `finetune review` at a pseudo-terminal."""
    env = dict(chat.base_env, USER="ada", LOGNAME="ada", TERM="xterm")
    drive = PtyDriver([sys.executable, "-m", "llm_finetuning.cli", "review", str(record)], env=env,
                      cwd=str(chat.project))
    count = json.loads(record.read_text())["samples"]
    for i in range(1, len(count) + 1):
        drive.expect(rf"Sample {i}/{len(count)}")
        drive.expect(r"> ")
        drive.send("a")
    drive.expect(r"\[s\] seal the review")
    drive.send("s")
    drive.expect(r"recorded as the reviewer \[ada\]")
    drive.send("")
    assert drive.wait() == 0, drive.text


def test_the_whole_workflow_runs_from_the_chat_through_the_broker(chat: Chat, tiny_model_dir: Path) -> None:
    started = time.monotonic()
    model = copy_model(tiny_model_dir, chat.project / "tiny")
    tiny_vowel_brief(chat.project, model, max_steps=12)
    protect = chat.finetune("protect", "--project", str(chat.project))
    assert protect.returncode == 0 and "only the plugin's broker starts here" in protect.stdout, protect.stderr

    first = chat.run("Measure the baseline and sample an inspection for brief.yaml.", main=[
        broker("check", brief="brief.yaml"),
        *polled("baseline", brief="brief.yaml", prompts=8, k=8),
        *polled("inspect", brief="brief.yaml", samples=50),
        Text("The inspection is ready for your review."),
    ], timeout=420)
    assert first.returncode == 0, first.describe()
    seen = results(first)
    assert seen["check"][0]["result"]["ok"] is True, first.describe()
    assert seen["baseline"][0]["state"] == "running" and seen["inspect"][0]["state"] == "running"
    baseline, inspect = (next(j for j in seen["job"] if j["verb"] == v and j["state"] == "finished")
                         for v in ("baseline", "inspect"))
    assert baseline["exit_code"] == 0 and baseline["result"]["pass_at_1"] > 0, baseline
    assert inspect["exit_code"] == 0 and inspect["result"]["samples"] == 50, inspect
    assert inspect["result"]["review_command"].startswith("finetune review ")

    review_at_a_terminal(chat, Path(inspect["result"]["record"]))

    status_step: Callable[[Request], ToolCall] = lambda r: ToolCall(  # noqa: E731
        "Bash", {"command": f"finetune status {RUN} --json", "description": "The run's state from the shell"})
    second = chat.run("/llm-finetuning:finetune brief.yaml", main=[
        broker("gate", brief="brief.yaml"),
        broker("render", brief="brief.yaml", run_dir=RUN),
        broker("launch", run_dir=RUN),
        broker("status", run_dir=RUN),
        status_step,
        Text("It is training in the background."),
    ], timeout=240)
    assert second.returncode == 0, second.describe()
    seen = results(second)
    gate = seen["gate"][0]["result"]
    assert gate["passed"] is True, second.describe()
    protection = next(c for c in gate["checks"] if c["id"] == "protection")
    assert protection["verdict"] == "pass" and protection["reason"].startswith("in the plugin's broker"), protection
    assert seen["render"][0]["exit_code"] == 0, second.describe()
    launch = seen["launch"][0]
    assert launch["exit_code"] == 0 and "started in the background, pid" in launch["stdout"], launch
    assert seen["status"][0]["result"]["state"] in ("running", "finished"), seen["status"]
    shell_status = second.transcript.calls_to("Bash")[0].result or ""
    # the sandboxed shell sees the run's lock, not its pid (docs/render-launch.md): right from both sides
    assert re.search(r'"state":\s*"(running|finished)"', shell_status), shell_status
    chat_ended = time.time()

    deadline = time.monotonic() + 600
    run = chat.project / RUN
    while time.monotonic() < deadline and not (run / LAUNCH_EXIT).is_file():
        time.sleep(1)
    assert (run / LAUNCH_EXIT).is_file(), (run / LAUNCH_LOG).read_text()
    assert (run / LAUNCH_EXIT).stat().st_mtime > chat_ended  # it trained on after `claude -p` had ended

    third = chat.run("How did the run in runs/run-1 go?", main=[
        broker("status", run_dir=RUN),
        broker("diagnose", run_dir=RUN),
        *polled("eval", run_dir=RUN, prompts=8, k=8),
        Text("Here are the figures."),
    ], timeout=420)
    assert third.returncode == 0, third.describe()
    seen = results(third)
    status = seen["status"][0]["result"]
    assert (status["state"], status["step"], status["max_steps"]) == ("finished", 12, 12), status
    assert "findings" in seen["diagnose"][0]["result"] or seen["diagnose"][0]["exit_code"] in (0, 1)
    evaluation = next(j for j in seen["job"] if j["verb"] == "eval" and j["state"] == "finished")
    assert evaluation["exit_code"] in (0, 1) and {"base", "trained", "ci95"} <= set(evaluation["result"]), evaluation
    final = subprocess.run([sys.executable, "-m", "llm_finetuning.cli", "status", str(run), "--json"],
                           capture_output=True, text=True, timeout=60, env=chat.base_env)
    print(f"workflow through the broker: {time.monotonic() - started:.0f} s; the sandboxed shell's status while "
          f"running: {shell_status[:300]}; the person's status after: {final.stdout[:200]}")
