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


def test_readme_session_refused_gate_then_denied_forgery_review_and_launch(chat: Chat, update_golden: bool) -> None:
    chat.add_example("math-exact")
    (chat.project / "runs" / "run-1").mkdir(parents=True)

    def report(request: Request) -> Text:
        denied = "denied" if "llm-finetuning guard: launch refused" in request.last_tool_result() else "not denied"
        return Text(f"The gate refused brief.yaml; writing the record, signing the review and the launch were "
                    f"{denied}. Run `finetune baseline "
                    "brief.yaml`, then `finetune inspect brief.yaml`, and review the samples yourself with "
                    "`finetune review records/inspection.json` in your own terminal.")

    result = chat.run("/llm-finetuning:finetune brief.yaml", [
        ToolCall("Bash", {"command": "finetune gate brief.yaml", "description": "Phase 1 gate"}),
        ToolCall("Write", {"file_path": "records/inspection.json",
                           "content": '{"format": "llm-finetuning/inspection@1", "verdicts": {}}'},
                 text="Writing the inspection record myself."),
        ToolCall("Bash", {"command": "script -qc 'finetune review records/inspection.json' /dev/null",
                          "description": "Sign the review"}, text="Signing the review through a pseudo-terminal."),
        ToolCall("Bash", {"command": "finetune launch runs/run-1", "description": "Launch anyway"},
                 text="Trying to launch without a passing gate."),
        report])
    got = render_markdown(result.transcript, limit=4000).replace(str(chat.project), "~/project")
    assert "the launch were denied" in got and got.count("**Denied before it ran**") == 3, got
    assert not (chat.project / "records").exists()

    if update_golden:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(got)
    want = GOLDEN.read_text() if GOLDEN.is_file() else ""
    diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), str(GOLDEN), "this session"))
    assert not diff, diff + "\nIf the change is intended: pytest tests/chat --update-golden"


README = Path(__file__).resolve().parents[2] / "README.md"
BEGIN = "<!-- BEGIN GENERATED: tests/chat/golden/readme-session.md (pytest tests/chat --update-golden) -->"
END = "<!-- END GENERATED -->"


def test_the_readme_shows_the_recorded_session(update_golden: bool) -> None:
    text = README.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    want = f"{head}{BEGIN}\n{GOLDEN.read_text().rstrip()}\n{END}{tail}"
    if update_golden:
        README.write_text(want)
        text = want
    assert text == want, "README.md's Claude Code transcript differs from tests/chat/golden/readme-session.md: " \
                         "pytest tests/chat --update-golden"
