"""The PreToolUse guard, fed real Claude Code hook input on stdin through `hooks/guard` (the command
hooks/hooks.json runs): forging a record, running `finetune review`, importing the records API and launching
an unverified run are denied with the reason and the fix; reading and the `finetune` verbs pass; a call the
guard cannot judge is denied when it touches records, review or a launch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / "hooks" / "guard"
HOOK_PY = REPO / "hooks" / "guard.py"
SH = shutil.which("sh") or "/bin/sh"
sys.path.insert(0, str(REPO / "tests" / "gate"))

from gate_fixtures import prepare_brief, render_passing  # noqa: E402


@pytest.fixture
def rendered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A brief folder with records and runs/r1 rendered by `finetune render` after a passing gate."""
    return render_passing(tmp_path, monkeypatch)


def run_hook(event: dict | str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The guard as Claude Code runs it: `sh hooks/guard` with the hook input on stdin."""
    if env is None:
        env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    data = event if isinstance(event, str) else json.dumps(event)
    return subprocess.run([SH, str(HOOK)], input=data, capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def event(tool: str, tool_input: dict, cwd: Path) -> dict:
    return {"session_id": "s", "transcript_path": "/dev/null", "cwd": str(cwd), "permission_mode": "default",
            "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input, "tool_use_id": "toolu_1"}


def hook(command: str, cwd: Path, isolated: bool = False, tool: str = "Bash", **extra: str) -> dict | None:
    """Run the guard on one call; returns its JSON answer or None (no output: the call goes through).
    `isolated` runs guard.py under a python3 that cannot import llm_finetuning (the gate then runs through
    the `finetune` CLI)."""
    tool_input = {"command": command, "description": "x"} if tool == "Bash" else {"file_path": command, **extra}
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if isolated:
        bare = cwd / ".bare-python"
        if not bare.exists():  # a Python without llm_finetuning, as on a machine where only the CLI is installed
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
        env.pop("PYTHONPATH", None)
        proc = subprocess.run([str(bare / "bin" / "python"), "-S", str(HOOK_PY)],
                              input=json.dumps(event(tool, tool_input, cwd)),
                              capture_output=True, text=True, env=env, cwd=cwd, timeout=120)
    else:
        proc = run_hook(event(tool, tool_input, cwd), cwd, env)
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


@pytest.mark.parametrize("layer", ["settings.json", "settings.local.json"])
def test_in_a_protected_project_a_bash_launch_goes_to_the_broker(rendered: Path, layer: str) -> None:
    """With the sandbox on (`finetune protect`), a run started from the Bash tool would end with the call, and the
    gate there cannot be judged from the agent's side: the launch belongs to the broker's tool
    (docs/claude-code.md, "The broker"), even for a run that would pass; `--plan` still only prints."""
    (rendered / ".claude").mkdir()
    (rendered / ".claude" / layer).write_text(json.dumps({"sandbox": {"enabled": True}}))
    for command in ("finetune launch runs/r1 --detach", "finetune launch runs/r1", "bash runs/r1/launch.sh"):
        reason = denied(hook(command, rendered))
        assert "in this protected project the Bash tool runs sandboxed" in reason
        assert 'Fix: launch through the plugin\'s broker: call the `mcp__plugin_llm-finetuning_finetune__launch` ' \
            'tool with {"run_dir": "RUN_DIR"}' in reason
    assert hook("finetune launch runs/r1 --plan", rendered) is None
    (rendered / ".claude" / "settings.local.json").write_text(json.dumps({"sandbox": {"enabled": False}}))
    assert hook("finetune launch runs/r1 --detach", rendered) is None  # no sandbox: the run is judged as before

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
                    "accelerate launch --config_file runs/r1/accelerate.yaml -m llm_finetuning.launch.worker runs/r1"):
        assert "grpo_config.yaml was edited or removed after rendering" in denied(hook(command, rendered))


def test_unparseable_launch_is_denied_and_other_tools_ignored(rendered: Path) -> None:
    assert "cannot be parsed" in denied(hook('finetune launch "runs/r1', rendered))
    assert hook("finetune launch runs/none", rendered, tool="Read") is None


def test_malformed_input_is_ignored_unless_it_touches_records(tmp_path: Path) -> None:
    assert run_hook("not json", tmp_path).stdout == ""
    assert "could not judge it" in denied(json.loads(run_hook("{not json: records/inspection.json", tmp_path).stdout))


def test_hooks_json_registers_the_guard_for_every_writing_tool() -> None:
    config = json.loads((REPO / "hooks" / "hooks.json").read_text())
    [entry] = config["hooks"]["PreToolUse"]
    assert set(entry["matcher"].split("|")) == {"Bash", "Write", "Edit", "MultiEdit", "NotebookEdit"}
    [h] = entry["hooks"]
    assert h["type"] == "command" and h["command"] == 'sh "${CLAUDE_PLUGIN_ROOT}/hooks/guard"'
    import re

    deadline = float(re.search(r"^DEADLINE_S = .* or (\d+)\)", HOOK_PY.read_text(), re.M).group(1))  # type: ignore[union-attr]
    assert deadline < h["timeout"], "the guard must deny before Claude Code's hook timeout lets the call through"


# --- records, review and the records API --------------------------------------------------------------------

FORGING_COMMANDS = [
    "echo '{}' > records/inspection.json",
    "printf x >> records/baseline.json",
    "cat /tmp/forged.json | tee records/inspection.json",
    "cp /tmp/forged.json records/inspection.json",
    "cp /tmp/forged.json records/",
    "mv records/inspection.json /tmp/old.json",
    "rm records/inspection.samples.jsonl",
    "rm -rf records",
    "rm -rf .",
    "cd records && echo x > inspection.json",
    "sed -i 's/disagree/agree/' records/inspection.json",
    "perl -pi -e 's/disagree/agree/' records/inspection.json",
    "truncate -s 0 records/inspection.json",
    "dd if=/dev/zero of=records/baseline.json bs=1 count=1",
    "find records -name '*.json' -delete",
    "ls records/*.json | xargs rm",
    "python3 -c \"import json; p='records/inspection.json'; open(p, 'w').write('{}')\"",
    "python - <<'EOF'\nopen('records/inspection.json', 'w').write('{}')\nEOF",
    "bash -c 'echo x > records/inspection.json'",
    "echo '{\"format\": \"llm-finetuning/inspection@1\"}' > evidence.json",
]


@pytest.fixture
def brief_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A brief folder with its sealed records, as `finetune inspect` and `finetune review` leave it."""
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "cache"))
    return prepare_brief(tmp_path / "b", "passing").parent


@pytest.mark.parametrize("command", FORGING_COMMANDS)
def test_bash_that_writes_moves_or_deletes_records_is_denied(command: str, brief_folder: Path) -> None:
    before = {p: p.read_bytes() for p in (brief_folder / "records").iterdir()}
    reason = denied(hook(command, brief_folder))
    assert reason.startswith("llm-finetuning guard: ")
    assert "finetune review RECORD" in reason and "own terminal" in reason, reason
    assert {p: p.read_bytes() for p in (brief_folder / "records").iterdir()} == before


@pytest.mark.parametrize("tool, extra", [
    ("Write", {"content": "{}"}),
    ("Edit", {"old_string": "disagree", "new_string": "agree"}),
    ("MultiEdit", {"edits": [{"old_string": "disagree", "new_string": "agree"}]}),
])
def test_file_tools_on_records_are_denied(tool: str, extra: dict, brief_folder: Path) -> None:
    for name in ("records/inspection.json", "records/inspection.samples.jsonl", "records/new.json"):
        reason = denied(hook(name, brief_folder, tool=tool, **extra))
        assert "records folder of the brief" in reason and "finetune review RECORD" in reason


def test_a_record_outside_a_records_folder_is_still_a_record(brief_folder: Path) -> None:
    moved = brief_folder / "evidence"
    moved.mkdir()
    (moved / "insp.json").write_bytes((brief_folder / "records" / "inspection.json").read_bytes())
    assert "is an llm-finetuning record" in denied(hook("evidence/insp.json", brief_folder, tool="Edit",
                                                        old_string="a", new_string="b"))
    assert "llm-finetuning record" in denied(hook("sed -i s/a/b/ evidence/insp.json", brief_folder))
    forged = '{"format": "llm-finetuning/inspection@1", "seal": {}}'
    assert "record JSON by hand" in denied(hook("evidence/new.json", brief_folder, tool="Write", content=forged))
    nb = {"notebook_path": "records/x.ipynb", "new_source": "print(1)"}
    answer = json.loads(run_hook(event("NotebookEdit", nb, brief_folder), brief_folder).stdout)
    assert "records folder of the brief" in denied(answer)


@pytest.mark.parametrize("command", [
    "finetune review records/inspection.json",
    "script -qc 'finetune review records/inspection.json' /dev/null",
    "expect -c 'spawn finetune review records/inspection.json; interact'",
    "python -m llm_finetuning.cli review records/inspection.json",
    "python3 -m llm_finetuning review records/inspection.json",
    "python -c \"import subprocess; subprocess.run(['finetune', 'review', 'records/inspection.json'])\"",
    "echo 'finetune review records/inspection.json' | bash",
    "sh sign.sh",
])
def test_finetune_review_is_denied_however_wrapped(command: str, brief_folder: Path) -> None:
    (brief_folder / "sign.sh").write_text("#!/bin/sh\nfinetune review records/inspection.json\n")
    reason = denied(hook(command, brief_folder))
    assert "runs `finetune review`" in reason and "own terminal" in reason and "wait for them" in reason


@pytest.mark.parametrize("command", [
    "python -c 'from llm_finetuning.records.inspection import seal; seal(\"x.json\", \"me\")'",
    "python3 - <<EOF\nfrom llm_finetuning.records import inspection\ninspection.seal('x.json', 'me')\nEOF",
    "python reseal.py",
])
def test_code_that_imports_the_records_api_is_denied(command: str, brief_folder: Path) -> None:
    (brief_folder / "reseal.py").write_text("import llm_finetuning.records.inspection as r\nr.seal('x.json', 'me')\n")
    assert "imports the llm_finetuning records API" in denied(hook(command, brief_folder))
    code = "from llm_finetuning.records.inspection import seal, set_verdict\n"
    assert "records API to write or seal" in denied(hook("tools/sign.py", brief_folder, tool="Write", content=code))


@pytest.mark.parametrize("command", [
    "cat records/inspection.json", "jq .review records/inspection.json", "grep -c agree records/inspection.json",
    "head -n 3 records/inspection.samples.jsonl", "ls -la records", "cp records/baseline.json /tmp/baseline-copy.json",
    "cat records/baseline.json > /tmp/b.json", "finetune gate brief.yaml", "finetune inspect brief.yaml --samples 64",
    "finetune baseline brief.yaml", "grep -rn 'finetune review' README.md", "echo hello > notes.txt",
    "rm -rf runs/old", "git status", "sha256sum records/*.json", "python -c 'print(1)'",
])
def test_reading_records_and_the_finetune_verbs_pass(command: str, brief_folder: Path) -> None:
    assert hook(command, brief_folder) is None


def test_file_tools_elsewhere_pass(brief_folder: Path) -> None:
    assert hook("notes.md", brief_folder, tool="Write", content="finetune review is for the person") is None
    assert hook("brief.yaml", brief_folder, tool="Edit", old_string="a", new_string="b") is None
    assert hook("data/x.json", brief_folder, tool="Write", content="{}") is None


def test_a_call_the_guard_cannot_judge_is_denied_when_it_touches_records(brief_folder: Path) -> None:
    # a NUL byte in a path makes the path unresolvable: a real internal error
    broken = event("Write", {"file_path": "records/\u0000x.json", "content": "{}"}, brief_folder)
    reason = denied(json.loads(run_hook(broken, brief_folder).stdout))
    assert "could not judge it (ValueError" in reason
    harmless = event("Write", {"file_path": "notes/\u0000x.md", "content": "{}"}, brief_folder)
    assert run_hook(harmless, brief_folder).stdout == ""


def test_a_judgement_past_the_deadline_denies(rendered: Path) -> None:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               LLM_FINETUNING_GUARD_DEADLINE_S="0.001")  # verifying a launch runs the gate: far longer than 1 ms
    proc = run_hook(event("Bash", {"command": "finetune launch runs/r1"}, rendered), rendered, env)
    assert "could not judge it (TimeoutError: judging the call took longer than 0.001 s)" in denied(json.loads(proc.stdout))


def test_without_python3_calls_that_touch_records_are_blocked(brief_folder: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with the shell's tools but no python3
    bin_dir.mkdir()
    for tool in ("cat", "dirname"):
        (bin_dir / tool).symlink_to(shutil.which(tool))  # type: ignore[arg-type]
    env = {"PATH": str(bin_dir)}
    touching = run_hook(event("Bash", {"command": "rm records/inspection.json"}, brief_folder), brief_folder, env)
    assert touching.returncode == 2 and "python3 is not on PATH" in touching.stderr
    other = run_hook(event("Bash", {"command": "ls -la"}, brief_folder), brief_folder, env)
    assert other.returncode == 0 and other.stdout == "" and other.stderr == ""


@pytest.mark.plugin
def test_real_claude_cli_accepts_the_hooks(tmp_path: Path) -> None:
    """`claude plugin validate --strict` (the real CLI) accepts hooks/hooks.json in a copy of the plugin."""
    import importlib.util

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
