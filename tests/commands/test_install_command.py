"""`finetune install-command`: writes the project's thin `/finetune` command, never over a different file
unless told to. (tests/chat/test_chat_bare_command.py checks with the real client that it hands over.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.commands.install_command import COMMAND_TEXT

FINETUNE = Path(sys.executable).parent / "finetune"


def install(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["install-command", *args])
    return result.exit_code, result.stdout, result.stderr


def test_writes_the_thin_command_and_prints_it(tmp_path: Path) -> None:
    code, out, err = install("--project", str(tmp_path))
    target = tmp_path / ".claude" / "commands" / "finetune.md"
    assert code == 0, err
    assert target.read_text() == COMMAND_TEXT
    assert out == (f"wrote {target}: /finetune BRIEF in Claude Code now hands over to the llm-finetuning plugin's "
                   f"/llm-finetuning:finetune (the plugin must be installed)\n{COMMAND_TEXT}"
                   f"To keep the agent's commands off the records and the reviewer's key there, run `finetune "
                   f"protect --project {tmp_path}` (docs/security.md says what it costs).\n")
    assert 'skill: "llm-finetuning:finetune"' in COMMAND_TEXT and 'args: "$ARGUMENTS"' in COMMAND_TEXT


def test_default_is_the_current_folder_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    first = subprocess.run([str(FINETUNE), "install-command"], cwd=tmp_path, capture_output=True, text=True,
                           check=False)
    assert first.returncode == 0, first.stderr
    target = tmp_path / ".claude" / "commands" / "finetune.md"
    written = target.stat().st_mtime_ns
    again = subprocess.run([str(FINETUNE), "install-command"], cwd=tmp_path, capture_output=True, text=True,
                           check=False)
    assert again.returncode == 0, again.stderr
    assert again.stdout == (".claude/commands/finetune.md: already installed; /finetune BRIEF hands over to "
                            "/llm-finetuning:finetune\n")
    assert target.stat().st_mtime_ns == written


def test_a_different_command_is_kept_unless_forced(tmp_path: Path) -> None:
    target = tmp_path / ".claude" / "commands" / "finetune.md"
    target.parent.mkdir(parents=True)
    target.write_text("my own /finetune\n")
    code, out, err = install("--project", str(tmp_path))
    assert code == 2 and out == ""
    assert err == (f"error: {target}: a different /finetune command is already there (left unchanged). "
                   f"Fix: run `finetune install-command --project {tmp_path} --force` to replace it\n")
    assert target.read_text() == "my own /finetune\n"

    code, out, err = install("--project", str(tmp_path), "--force")
    assert code == 0, err
    assert out.startswith(f"wrote {target}:")
    assert target.read_text() == COMMAND_TEXT


def test_the_verb_imports_no_ml_library(tmp_path: Path) -> None:
    code = ("import sys; from click.testing import CliRunner; from llm_finetuning.cli import cli; "
            f"r = CliRunner().invoke(cli, ['install-command', '--project', {str(tmp_path)!r}]); "
            "heavy = [m for m in ('torch', 'transformers', 'trl', 'vllm', 'numpy') if m in sys.modules]; "
            "print(r.exit_code, heavy)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "0 []", done.stderr
