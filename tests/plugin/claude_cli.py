"""Where the real Claude Code CLI is: the pinned one the tests were checked against, and the newest release.

`.ci/run` installs `@anthropic-ai/claude-code@<the pin in .ci/claude-code-version>` into `.ci/node` (exported
as CLAUDE_BIN) and, when the registry's newest release differs, that one into `.ci/node-latest` (exported as
CLAUDE_BIN_LATEST).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PIN_FILE = REPO / ".ci" / "claude-code-version"
CLAUDE_CANDIDATES = (
    REPO / "node_modules/.bin/claude",
    REPO / ".ci/node/node_modules/.bin/claude",
    Path("/tmp/claudecli/node_modules/.bin/claude"),
)
LATEST_CANDIDATES = (REPO / ".ci/node-latest/node_modules/.bin/claude",)


def pinned_version() -> str:
    """The Claude Code version the plugin's tests were checked against (one place names it)."""
    return PIN_FILE.read_text().strip()


def _installed(variable: str, candidates: tuple[Path, ...]) -> Path | None:
    configured = os.environ.get(variable)
    if configured:
        return Path(configured)
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def find_claude() -> Path | None:
    """$CLAUDE_BIN, else a local npm install of @anthropic-ai/claude-code, else `claude` on PATH."""
    found = _installed("CLAUDE_BIN", CLAUDE_CANDIDATES) or shutil.which("claude")
    return Path(found) if found else None


def find_claude_latest() -> Path | None:
    """$CLAUDE_BIN_LATEST, else `.ci/node-latest`'s install, else None (the newest is the pin, or unknown)."""
    return _installed("CLAUDE_BIN_LATEST", LATEST_CANDIDATES)


@cache
def claude_version(path: Path) -> str:
    """`claude --version` as the bare version number ("2.1.332 (Claude Code)" -> "2.1.332")."""
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60, check=True,
                         env=dict(os.environ, DISABLE_AUTOUPDATER="1")).stdout
    return out.split()[0] if out.split() else ""


CLIENTS = ("pinned", "latest")


def client_path(which: str = "pinned") -> Path:
    """The CLI for `which` ("pinned" or "latest"). Skips when none is installed here, or when the newest
    release is the pinned one (then the pinned run already covers it); fails when $CLAUDE_BIN is not a program."""
    path = find_claude() if which == "pinned" else find_claude_latest()
    if path is None:
        if which == "pinned":
            pytest.skip("Claude Code CLI not found: set CLAUDE_BIN or run .ci/run (which installs "
                        f"@anthropic-ai/claude-code@{pinned_version()} into .ci/node)")
        pytest.skip("no newer Claude Code than the pin installed (.ci/run exports CLAUDE_BIN_LATEST when the "
                    "registry's newest release differs from the pin)")
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{'CLAUDE_BIN' if which == 'pinned' else 'CLAUDE_BIN_LATEST'}={path} is not an executable file")
    if which == "latest":
        pinned = find_claude()
        if pinned is not None and claude_version(path) == claude_version(pinned):
            pytest.skip(f"the newest Claude Code ({claude_version(path)}) is the pinned one")
    return path
