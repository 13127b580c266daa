"""The README's Claude Code transcript is a real scripted session with the pinned client, kept as a golden
file (tests/chat/golden/readme-session.md); `pytest tests/chat --update-golden` rewrites it."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from harness import Chat
from messages_server import Request, Text, ToolCall
from transcript import render_markdown

pytestmark = pytest.mark.plugin

GOLDEN = Path(__file__).parent / "golden" / "readme-session.md"


def test_readme_session_refused_gate_then_denied_launch(chat: Chat, update_golden: bool) -> None:
    chat.add_example("math-exact")
    (chat.project / "runs" / "run-1").mkdir(parents=True)

    def report(request: Request) -> Text:
        denied = "denied" if "launch guard" in request.last_tool_result() else "not denied"
        return Text(f"The gate refused brief.yaml and the launch was {denied}. Run `finetune baseline "
                    "brief.yaml`, then `finetune inspect brief.yaml`, and review the samples yourself with "
                    "`finetune review records/inspection.json` in your own terminal.")

    result = chat.run("/llm-finetuning:finetune brief.yaml", [
        ToolCall("Bash", {"command": "finetune gate brief.yaml", "description": "Phase 1 gate"}),
        ToolCall("Bash", {"command": "finetune launch runs/run-1", "description": "Launch anyway"},
                 text="Trying to launch without a passing gate."),
        report])
    got = render_markdown(result.transcript, limit=4000).replace(str(chat.project), "~/project")
    assert "the launch was denied" in got and "**Denied before it ran**" in got, got

    if update_golden:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(got)
    want = GOLDEN.read_text() if GOLDEN.is_file() else ""
    diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), str(GOLDEN), "this session"))
    assert not diff, diff + "\nIf the change is intended: pytest tests/chat --update-golden"
