"""Fixtures for the plugin tests: the real Claude Code CLI, run with a temporary HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from claude_cli import REPO, client_path, find_claude  # noqa: E402

__all__ = ["find_claude"]


@pytest.fixture(scope="session")
def claude_bin(request: pytest.FixtureRequest) -> Path:
    """The pinned Claude Code CLI (or, parametrized indirectly with "latest", the newest release)."""
    return client_path(getattr(request, "param", "pinned"))


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
