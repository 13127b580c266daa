"""The PreToolUse launch guard, fed real Claude Code hook input on stdin: it lets a run rendered after a
passing gate through, and denies a launch with no manifest, edited files, or evidence gone stale."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli

REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / "hooks" / "guard_launch.py"
sys.path.insert(0, str(REPO / "tests" / "gate"))

from gate_fixtures import prepare_brief  # noqa: E402


@pytest.fixture
def rendered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A brief folder with records and runs/r1 rendered by `finetune render` after a passing gate."""
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "cache"))
    brief = prepare_brief(tmp_path / "b", "passing")
    monkeypatch.chdir(brief.parent)
    result = CliRunner().invoke(cli, ["render", "brief.yaml", "-o", "runs/r1"])
    assert result.exit_code == 0, result.output
    return brief.parent


def hook(command: str, cwd: Path, isolated: bool = False, tool: str = "Bash") -> dict | None:
    """Run the guard as Claude Code does; returns its JSON answer or None (no output)."""
    event = {"session_id": "s", "transcript_path": "/dev/null", "cwd": str(cwd), "permission_mode": "default",
             "hook_event_name": "PreToolUse", "tool_name": tool,
             "tool_input": {"command": command, "description": "launch"}, "tool_use_id": "toolu_1"}
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    args = [sys.executable, "-S", str(HOOK)] if isolated else [sys.executable, str(HOOK)]
    proc = subprocess.run(args, input=json.dumps(event), capture_output=True, text=True, env=env, cwd=cwd, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) if proc.stdout.strip() else None


def denied(answer: dict | None) -> str:
    assert answer is not None, "expected a deny"
    out = answer["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "deny"
    return str(out["permissionDecisionReason"])


@pytest.mark.parametrize("command", ["ls -la", "cat runs/r1/grpo_config.yaml", "finetune gate brief.yaml",
                                     "echo finetune launch", "finetune launch runs/none --plan"])
def test_commands_that_launch_nothing_pass_silently(command: str, rendered: Path) -> None:
    assert hook(command, rendered) is None


@pytest.mark.parametrize("command", ["finetune launch runs/r1", "cd runs && FOO=1 finetune launch r1 --resume",
                                     "bash -c 'finetune launch runs/r1'", "python -m llm_finetuning.cli launch runs/r1"])
def test_a_run_rendered_after_a_passing_gate_is_let_through(command: str, rendered: Path) -> None:
    assert hook(command, rendered) is None


def test_no_manifest_is_denied(rendered: Path) -> None:
    (rendered / "runs" / "hand-made").mkdir()
    reason = denied(hook("finetune launch runs/hand-made", rendered))
    assert "has no manifest.json" in reason and "finetune render BRIEF -o RUN_DIR" in reason


def test_reward_code_changed_after_rendering_is_denied(rendered: Path) -> None:
    src = rendered / "my_rewards.py"
    src.write_text(src.read_text().replace("1.0 if", "1.5 if"))
    for isolated in (False, True):  # in process, and through the `finetune` CLI when the package is not importable
        reason = denied(hook("finetune launch runs/r1", rendered, isolated=isolated))
        assert "the gate rejects the brief now: base_success_nonzero" in reason
        assert "reward_inspected: records.inspection: stale: reward code changed since the record: " \
            "my_rewards.py (my_rewards:contains_answer) changed" in reason


def test_edited_rendered_file_is_denied_also_when_run_directly(rendered: Path) -> None:
    cfg = rendered / "runs" / "r1" / "grpo_config.yaml"
    cfg.write_text(cfg.read_text() + "\nlearning_rate: 1.0e-4\n")
    for command in ("finetune launch runs/r1", "bash runs/r1/launch.sh",
                    "trl grpo --config runs/r1/grpo_config.yaml"):
        assert "grpo_config.yaml was edited or removed after rendering" in denied(hook(command, rendered))


def test_unparseable_launch_is_denied_and_other_tools_ignored(rendered: Path) -> None:
    assert "cannot be parsed" in denied(hook('finetune launch "runs/r1', rendered))
    assert hook("finetune launch runs/none", rendered, tool="Read") is None


def test_malformed_input_is_ignored() -> None:
    proc = subprocess.run([sys.executable, str(HOOK)], input="not json", capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == ""


def test_hooks_json_registers_the_guard_for_bash() -> None:
    config = json.loads((REPO / "hooks" / "hooks.json").read_text())
    [entry] = config["hooks"]["PreToolUse"]
    assert entry["matcher"] == "Bash"
    [h] = entry["hooks"]
    assert h["type"] == "command" and "${CLAUDE_PLUGIN_ROOT}/hooks/guard_launch.py" in h["command"]


@pytest.mark.plugin
def test_real_claude_cli_accepts_the_hooks(tmp_path: Path) -> None:
    """`claude plugin validate --strict` (the real CLI) accepts hooks/hooks.json in a copy of the plugin."""
    import importlib.util
    import shutil

    spec = importlib.util.spec_from_file_location("plugin_conftest", REPO / "tests" / "plugin" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    claude = module.find_claude()
    if claude is None:
        pytest.skip("the Claude Code CLI is not installed (npm install @anthropic-ai/claude-code)")
    plugin = tmp_path / "plugin"
    shutil.copytree(REPO / ".claude-plugin", plugin / ".claude-plugin")
    shutil.copytree(REPO / "hooks", plugin / "hooks", ignore=shutil.ignore_patterns("__pycache__"))
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.run([str(claude), "plugin", "validate", str(plugin), "--strict"], capture_output=True,
                          text=True, env=dict(os.environ, HOME=str(home)), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Validation passed" in proc.stdout + proc.stderr
