"""bin/finetune: the command the plugin puts on the Bash tool's PATH. It runs the installed CLI, or the
private environment llm-finetuning-setup builds, or says in one line how to install it (exit 2)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / "bin"
# what the launcher needs from the system; python3 is left out on purpose (no importable package)
TOOLS = ("sh", "dirname", "basename", "grep", "tr", "printf", "sed", "cat")


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    """A folder with only the basic tools the launcher uses: no python3, no finetune."""
    folder = tmp_path / "tools"
    folder.mkdir()
    for name in TOOLS:
        found = shutil.which(name)
        if found:
            (folder / name).symlink_to(found)
    return folder


def launch(args: list[str], path: list[Path], home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["finetune", *args], capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": os.pathsep.join(map(str, path)), "HOME": str(home), **env},
                          executable=str(path[0] / "finetune"))


def installed_finetune() -> Path:
    script = Path(sys.executable).parent / "finetune"
    if not script.is_file():
        pytest.skip(f"no `finetune` console script beside {sys.executable}; install the package with pip")
    return script


def test_nothing_installed_prints_one_line_and_exits_2(tools: Path, tmp_path: Path) -> None:
    result = launch(["gate", "brief.yaml"], [BIN, tools], tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("finetune: the llm-finetuning CLI is not installed.")
    assert "pip install llm-finetuning" in lines[0]
    assert f"pip install -e {REPO}" in lines[0]
    assert "llm-finetuning-setup" in lines[0]
    assert "Traceback" not in result.stderr


def test_another_copy_of_the_launcher_is_not_mistaken_for_the_cli(tools: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-version/bin"
    shutil.copytree(BIN, other)
    result = launch(["--version"], [other, BIN, tools], tmp_path)
    assert result.returncode == 2 and "not installed" in result.stderr


def test_runs_the_installed_cli(tools: Path, tmp_path: Path) -> None:
    real = installed_finetune()
    result = launch(["--version"], [BIN, real.parent, tools], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "finetune, version 0.1.0"
    checked = launch(["check", str(REPO / "examples/math-exact/brief.yaml")], [BIN, real.parent, tools], tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "valid brief 'math-exact'" in checked.stdout


def test_runs_the_private_environment_in_the_plugin_data_folder(tools: Path, tmp_path: Path) -> None:
    real = installed_finetune()
    data = tmp_path / "plugin-data"
    (data / "venv/bin").mkdir(parents=True)
    (data / "venv/bin/finetune").symlink_to(real)
    printed = subprocess.run([str(BIN / "llm-finetuning-setup"), "--print-venv"], capture_output=True, text=True,
                             env={"PATH": str(tools), "HOME": str(tmp_path), "CLAUDE_PLUGIN_DATA": str(data)},
                             check=True)
    assert printed.stdout.strip() == str(data / "venv")
    result = launch(["--version"], [BIN, tools], tmp_path, CLAUDE_PLUGIN_DATA=str(data))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "finetune, version 0.1.0"


def test_setup_refuses_an_unknown_option_in_one_line(tools: Path, tmp_path: Path) -> None:
    result = subprocess.run([str(BIN / "llm-finetuning-setup"), "--bogus"], capture_output=True, text=True,
                            env={"PATH": str(tools), "HOME": str(tmp_path)}, check=False)
    assert result.returncode == 2
    assert result.stderr.strip() == ("llm-finetuning-setup: unknown option '--bogus' "
                                     "(use --train, --print-venv or --help)")
