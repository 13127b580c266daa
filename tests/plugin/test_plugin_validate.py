"""`claude plugin validate --strict` accepts the plugin and its marketplace with no warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.plugin


def _assert_clean(result, what: str) -> None:  # type: ignore[no-untyped-def]
    out = result.stdout + result.stderr
    assert result.returncode == 0, f"{what}: exit {result.returncode}\n{out}"
    assert "Validation passed" in out, out
    assert "warning" not in out.lower(), out


@pytest.mark.parametrize("target", [".", ".claude-plugin/plugin.json", ".claude-plugin/marketplace.json"])
def test_validate_strict_passes_without_warnings(run_claude, target: str) -> None:  # type: ignore[no-untyped-def]
    _assert_clean(run_claude("plugin", "validate", target, "--strict", cwd=REPO), f"validate {target}")


def test_validate_directory_profile(run_claude) -> None:  # type: ignore[no-untyped-def]
    result = run_claude("plugin", "validate", ".", "--strict", "--profile", "directory", cwd=REPO)
    if "unknown option '--profile'" in result.stderr:
        version = run_claude("--version").stdout.strip()
        pytest.skip(f"this Claude Code ({version}) has no `plugin validate --profile`; the directory "
                    "listing's needs (README, LICENSE, an icon) are checked in test_plugin_crosscheck.py")
    _assert_clean(result, "validate --profile directory")
