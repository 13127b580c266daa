"""A chat with the real Claude Code client: the plugin installed as a user would, a project folder, and
`claude -p PROMPT` driven by a `ScriptedModel`.

    def test_x(chat):                                   # the fixture in conftest.py
        brief = chat.add_example("math-exact")
        result = chat.run("/llm-finetuning:finetune brief.yaml",
                          main=[ToolCall("Bash", {"command": "finetune gate brief.yaml"}), Text("done")])
        [gate] = result.transcript.calls_to("Bash")
        assert "FAIL" in gate.result

`result.describe()` (printed when a test fails) is the Markdown transcript plus the client's output.

To add a scenario: script the model's steps (`ToolCall`, `Text`, a function of the `Request` so far,
`Repeat(step, until)` to poll), give a subagent its own steps with `agents={name: (a line of its system
prompt, steps)}`, and assert on `result.transcript` (`calls_to("Write")[0].result`, `.denial_reason`,
`user_text()`, `system_prompts(role)`, `tool_lists(role)`). Mark it `@both_clients` to run it with the
newest Claude Code as well. CHAT_TRANSCRIPTS=DIR writes every chat's transcript to DIR.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from messages_server import ScriptedModel, SideHandler, Step, ToolCall, default_side
from transcript import Transcript, render_markdown

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
MARKETPLACE = "llm-finetuning-marketplace"
PLUGIN = "llm-finetuning"
PLUGIN_ID = f"{PLUGIN}@{MARKETPLACE}"
AGENT = "llm-finetuning-training-engineer"
AGENT_TYPE = f"{PLUGIN}:{AGENT}"  # how Claude Code 2.1.x names a plugin agent for the Agent tool
DEFAULT_TOOLS = "Bash,Read,Edit,Write,Agent,Skill"
BROKER_PREFIX = f"mcp__plugin_{PLUGIN}_finetune__"  # the broker's tools as the model calls them (docs/claude-code.md)
BROKER_SERVER = BROKER_PREFIX.rstrip("_")  # a permission rule that allows every tool of the server
DUMMY_KEY = "sk-ant-scripted-model-no-network"

# a test marked so also runs with the newest Claude Code release when it differs from the pin
both_clients = pytest.mark.parametrize("client", ["pinned", "latest"], indirect=True)


@dataclass
class ChatResult:
    """One `claude -p` run: what the client sent the scripted model, and what it printed."""

    prompt: str
    transcript: Transcript
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    other_calls: list[tuple[str, str]] = field(default_factory=list)

    def describe(self) -> str:
        roles = ", ".join(f"{role} x{len(self.transcript.of(role))}" for role in self.transcript.roles) or "none"
        parts = [render_markdown(self.transcript), f"requests by role: {roles}",
                 f"other endpoints called: {self.other_calls or 'none'}",
                 f"claude exit code: {self.returncode} after {self.seconds:.1f} s",
                 f"--- claude stdout ---\n{self.stdout.rstrip()}", f"--- claude stderr ---\n{self.stderr.rstrip()}"]
        for role in self.transcript.roles:
            if role != "main":
                parts.append(f"--- {role} ---\n" + render_markdown(self.transcript, role))
        return "\n".join(parts)


@dataclass
class Chat:
    """A temporary HOME with the plugin installed from a copy of this repository's marketplace, and a
    project folder; `run` starts the real client there against a scripted model."""

    claude: Path
    home: Path
    project: Path
    repo_copy: Path
    runs: list[ChatResult] = field(default_factory=list)
    key_dir: Path | None = None  # the person's key folder in this chat; HOME/keys unless a test names another

    @property
    def base_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_"))}
        # the venv's `finetune` (and the python3 the guard hook runs with) come first; the client adds the
        # plugin's bin/ to the Bash tool's PATH itself
        path = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "/usr/bin:/bin")])
        env.update(HOME=str(self.home), PATH=path, DISABLE_TELEMETRY="1", DISABLE_AUTOUPDATER="1",
                   DISABLE_ERROR_REPORTING="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                   LLM_FINETUNING_CACHE=str(self.home / ".cache" / "llm-finetuning"), TMPDIR=str(self.tmp),
                   # the person's key folder of this chat alone: a key another test made in the session's folder
                   # is not this person's (the gate's protection check reads whether it opens)
                   LLM_FINETUNING_KEY_DIR=str(self.key_dir or self.home / "keys"))
        return env

    @property
    def tmp(self) -> Path:
        """The client's temporary folder (it keeps a folder per project there), inside the test's HOME."""
        path = self.home / "tmp"
        path.mkdir(exist_ok=True)
        return path

    def claude_cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """`claude ARGS...` (no model involved: plugin management, --version)."""
        return subprocess.run([str(self.claude), *args], cwd=self.project, env=self.base_env, capture_output=True,
                              text=True, timeout=timeout, check=False)

    def install_plugin(self) -> None:
        """As a user would: add the repository's marketplace, install the plugin from it, trust the project."""
        for args in (("plugin", "marketplace", "add", str(self.repo_copy)), ("plugin", "install", PLUGIN_ID)):
            done = self.claude_cli(*args)
            assert done.returncode == 0, f"claude {' '.join(args)}: {done.stdout}{done.stderr}"
        config_path = self.home / ".claude.json"
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
        config["hasCompletedOnboarding"] = True  # the interactive client asks otherwise; -p does not need it
        config.setdefault("projects", {}).setdefault(str(self.project), {})["hasTrustDialogAccepted"] = True
        config_path.write_text(json.dumps(config, indent=2))

    def add_example(self, name: str, into: str = ".") -> Path:
        """Copy examples/<name> (brief, data, reward code, records if any) into the project; the brief's path."""
        dest = self.project / into
        shutil.copytree(EXAMPLES / name, dest, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("runs", "__pycache__"))
        return dest / "brief.yaml"

    def finetune(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`finetune ARGS...` run directly in the project, as the Bash tool would (for comparisons)."""
        return subprocess.run([str(Path(sys.executable).parent / "finetune"), *args], cwd=self.project,
                              env=self.base_env, capture_output=True, text=True, timeout=120, check=False)

    def run(self, prompt: str, main: Sequence[Step] = (), *,
            agents: Mapping[str, tuple[str, Sequence[Step]]] | None = None, side: SideHandler | list[Step] = default_side,
            allowed_tools: str = DEFAULT_TOOLS, extra_args: Sequence[str] = (), timeout: float = 60) -> ChatResult:
        """`claude -p PROMPT --allowedTools ...` against a scripted model. `agents` maps a name to (a marker
        found in that subagent's system prompt, its steps)."""
        model = ScriptedModel(main=list(main), side=side)
        for name, (marker, steps) in (agents or {}).items():
            model.agent_script(name, marker, steps)
        args = [str(self.claude), "-p", prompt, "--allowedTools", allowed_tools, *extra_args]
        started = time.monotonic()
        with model:
            env = dict(self.base_env, ANTHROPIC_BASE_URL=model.base_url, ANTHROPIC_API_KEY=DUMMY_KEY)
            try:
                done = subprocess.run(args, cwd=self.project, env=env, capture_output=True, text=True,
                                      timeout=timeout, stdin=subprocess.DEVNULL, check=False)
                code, out, err = done.returncode, done.stdout, done.stderr
            except subprocess.TimeoutExpired as exc:
                code = None
                out = _text(exc.stdout)
                err = _text(exc.stderr) + f"\n[harness: claude -p timed out after {timeout} s]"
        result = ChatResult(prompt, Transcript(list(model.requests), prompt), code, out, err,
                            time.monotonic() - started, list(model.other_calls))
        self.runs.append(result)
        return result


def broker(tool: str, text: str = "", **arguments: object) -> ToolCall:
    """The model calls one of the broker's MCP tools (`broker("gate", brief="brief.yaml")`)."""
    return ToolCall(BROKER_PREFIX + tool, dict(arguments), text)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data
