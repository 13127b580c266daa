"""The Claude Code client the tests ran with is the pinned one (in CI), and the pin is named in one place."""

from __future__ import annotations

import os
import re

import pytest
from claude_cli import PIN_FILE, REPO, claude_version, find_claude, find_claude_latest, pinned_version

pytestmark = pytest.mark.plugin


def test_the_pin_is_one_version_named_in_one_place() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned_version()), PIN_FILE.read_text()
    run = (REPO / ".ci" / "run").read_text()
    assert ".ci/claude-code-version" in run
    assert pinned_version() not in run, ".ci/run names the version itself: read .ci/claude-code-version instead"


@pytest.mark.skipif(not (os.environ.get("CI") or os.environ.get("CLAUDE_BIN")),
                    reason="no Claude Code client named: run `bash .ci/run` (it installs the pin and exports "
                           "CLAUDE_BIN), or set CLAUDE_BIN to the client the tests use")
def test_ci_runs_the_pinned_client() -> None:
    """The client the tests run against is the pin: under CI, and wherever CLAUDE_BIN names one (`.ci/run`
    exports it, so a newcomer running `bash .ci/run` gets this check without setting CI)."""
    claude = find_claude()
    assert claude is not None, "CI must install the Claude Code CLI (.ci/run exports CLAUDE_BIN)"
    assert claude_version(claude) == pinned_version(), f"{claude} is not the pinned Claude Code"
    latest = find_claude_latest()
    if latest is not None:  # .ci/run installs the newest release only when it differs from the pin
        assert claude_version(latest) != pinned_version(), f"{latest} is the pin again"


def test_ci_lints_and_type_checks_as_the_docs_say_then_runs_the_readme_test_command() -> None:
    """docs/development.md: CI runs `ruff check src tests bench` and `mypy`; the README's test command is last."""
    run = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()
           if line.strip() and not line.lstrip().startswith(("#", "echo"))]
    development = (REPO / "docs" / "development.md").read_text()
    assert "ruff check src tests bench && mypy" in development
    assert "ruff check src tests bench" in run and "mypy" in run
    assert run[-1] == "python -m pytest -q -p no:cacheprovider"
    assert run.index("mypy") < len(run) - 1 and run.index("ruff check src tests bench") < len(run) - 1
