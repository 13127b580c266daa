"""Fixtures for the plugin tests: the real Claude Code CLI, run with a temporary HOME."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLAUDE_CANDIDATES = (
    REPO / "node_modules/.bin/claude",
    REPO / ".ci/node/node_modules/.bin/claude",
    Path("/tmp/claudecli/node_modules/.bin/claude"),
)


def find_claude() -> Path | None:
    """$CLAUDE_BIN, else a local npm install of @anthropic-ai/claude-code, else `claude` on PATH."""
    configured = os.environ.get("CLAUDE_BIN")
    if configured:
        return Path(configured)
    for candidate in CLAUDE_CANDIDATES:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("claude")
    return Path(found) if found else None


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The Claude Code CLI. Skips only when none is installed locally; a missing $CLAUDE_BIN fails."""
    path = find_claude()
    if path is None:
        pytest.skip("Claude Code CLI not found: set CLAUDE_BIN or `npm install --prefix /tmp/claudecli "
                    "@anthropic-ai/claude-code` (CI sets CLAUDE_BIN, so these tests run there)")
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"CLAUDE_BIN={path} is not an executable file")
    return path


RunClaude = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_claude(claude_bin: Path, tmp_path: Path) -> RunClaude:
    """Run `claude ARGS...` with HOME in a fresh temporary folder and no network-bound extras."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_"))}
    env.update(HOME=str(home), DISABLE_TELEMETRY="1", DISABLE_AUTOUPDATER="1", DISABLE_ERROR_REPORTING="1",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")

    def run(*args: str, cwd: Path = REPO, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(claude_bin), *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    run.home = home  # type: ignore[attr-defined]
    return run
