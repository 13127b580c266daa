"""Install the plugin from the repository's own marketplace into a temporary HOME, as a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.plugin

REPO = Path(__file__).resolve().parents[2]
MARKETPLACE = "llm-finetuning-marketplace"
PLUGIN = "llm-finetuning"
SKILLS = ["finetuning-method-selection", "grpo-rlvr-training", "preference-optimization",
          "eval-harness-first", "lora-qlora-recipes"]
IGNORED_IN_COPY = shutil.ignore_patterns(".git", ".venv", "node_modules", "__pycache__", "*.egg-info", ".ci",
                                          "runs", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".whl", ".dev")


def copy_repository(dest: Path) -> Path:
    """The files a clone of the repository would have (tracked and not ignored), copied to `dest`."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=REPO, capture_output=True, check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(REPO, dest, ignore=IGNORED_IN_COPY, symlinks=True)
        return dest
    for rel in filter(None, listed.split("\0")):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.mark.parametrize("claude_bin", ["pinned", "latest"], indirect=True)
def test_install_from_own_marketplace(run_claude, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = copy_repository(tmp_path / "llm-finetuning")

    added = run_claude("plugin", "marketplace", "add", str(repo))
    assert added.returncode == 0, added.stdout + added.stderr
    assert MARKETPLACE in added.stdout + added.stderr

    installed = run_claude("plugin", "install", f"{PLUGIN}@{MARKETPLACE}")
    assert installed.returncode == 0, installed.stdout + installed.stderr

    details = run_claude("plugin", "details", f"{PLUGIN}@{MARKETPLACE}")
    out = details.stdout
    assert details.returncode == 0, out + details.stderr
    inventory = {line.split()[0]: line for line in out.splitlines()
                 if line.strip().startswith(("Skills", "Agents", "Commands"))}
    listed = {name.strip(",") for name in inventory["Skills"].split()}
    for skill in SKILLS:
        assert skill in listed, f"{skill} missing from: {inventory['Skills']}"
    # Claude Code 2.1.x lists the /finetune command among the skills; older versions under Commands
    commands = listed | {name.strip(",") for name in inventory.get("Commands", "").split()}
    assert "finetune" in commands, out
    assert "llm-finetuning-training-engineer" in inventory["Agents"].split(), out
    assert "0.1.0" in out

    # the installed copy carries the launcher, still executable, and it derives the plugin's data folder
    copies = sorted((run_claude.home / ".claude/plugins/cache").glob(f"{MARKETPLACE}/{PLUGIN}/*/bin/finetune"))
    assert len(copies) == 1, f"expected one installed copy of bin/finetune, found {copies}"
    launcher = copies[0]
    install_path = launcher.parent.parent
    assert os.access(launcher, os.X_OK)
    setup = subprocess.run([str(install_path / "bin/llm-finetuning-setup"), "--print-venv"], capture_output=True,
                           text=True, env={"HOME": str(run_claude.home), "PATH": "/usr/bin:/bin"}, check=True)
    data = run_claude.home / ".claude/plugins/data" / f"{PLUGIN}-{MARKETPLACE}"
    assert setup.stdout.strip() == str(data / "venv")
    real = Path(sys.executable).parent / "finetune"
    if real.is_file():  # with the CLI installed, the installed plugin's `finetune` is the real one
        version = subprocess.run(["finetune", "--version"], executable=str(launcher), capture_output=True, text=True,
                                 env={"HOME": str(run_claude.home), "PATH": f"{launcher.parent}:{real.parent}:/usr/bin:/bin"},
                                 check=False)
        assert version.returncode == 0 and version.stdout.strip() == "finetune, version 0.1.0", version.stderr
