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


@pytest.mark.skipif(not os.environ.get("CI"), reason="checked when CI runs .ci/run, which installs the pin")
def test_ci_runs_the_pinned_client() -> None:
    claude = find_claude()
    assert claude is not None, "CI must install the Claude Code CLI (.ci/run exports CLAUDE_BIN)"
    assert claude_version(claude) == pinned_version(), f"{claude} is not the pinned Claude Code"
    latest = find_claude_latest()
    if latest is not None:  # .ci/run installs the newest release only when it differs from the pin
        assert claude_version(latest) != pinned_version(), f"{latest} is the pin again"
