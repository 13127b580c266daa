"""The guard imports nothing from the project (docs/security.md, "The guard's own process"): `hooks/guard`
starts Python isolated, imports everything before it reads the call, and runs the gate in an isolated child;
and it takes the record writers, the manifest check and file hashing from the package's own
`llm_finetuning.integrity`, not from lists of its own."""

from __future__ import annotations

import ast
import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import llm_finetuning
from llm_finetuning import integrity

REPO = Path(__file__).resolve().parents[2]
HOOKS = REPO / "hooks"
sys.path[:0] = [str(Path(__file__).resolve().parent), str(REPO / "tests" / "gate")]

from gate_fixtures import render_passing  # noqa: E402
from test_guard import denied, event, hook, run_hook  # noqa: E402


@pytest.fixture
def rendered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A brief folder with records and runs/r1 rendered after a passing gate."""
    return render_passing(tmp_path, monkeypatch)

# Calls that make the guard use every part of itself: a glob it expands, an archive it lists, base64 it
# decodes, a script it reads, a file tool, and a launch, for which it runs the gate.
CALLS = [
    ("Bash", {"command": "ls *.json records/*"}),
    ("Bash", {"command": "tar -xf bundle.tar"}),
    ("Bash", {"command": "echo cmVjb3Jkcw== | base64 -d"}),
    ("Bash", {"command": "python3 tool.py"}),
    ("Write", {"file_path": "notes.py", "content": "import json\nprint(json.dumps({}))\n"}),
    ("Bash", {"command": "finetune launch runs/r1 --detach"}),
]

# What the hook and the gate import, computed by running them: the guard module on every call above, then
# the CLI's gate (which the guard runs in a child interpreter for the launch) on the same brief.
IMPORTED = """
import json, sys
sys.path.insert(0, sys.argv[1])
import guard
for tool, tool_input in json.loads(sys.argv[3]):
    try:
        guard.check_bash(tool_input["command"], guard.Path(sys.argv[2])) if tool == "Bash" else \\
            guard.check_file_tool(tool, tool_input, guard.Path(sys.argv[2]))
    except guard.Denied:
        pass
from llm_finetuning.cli import cli
try:
    cli(["gate", "brief.yaml", "--json"])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def imported_modules(folder: Path) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", IMPORTED, str(HOOKS), str(folder), json.dumps(CALLS)],
                          cwd=folder, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {name.split(".")[0] for name in json.loads(proc.stderr.strip().splitlines()[-1])}


def plant(folder: Path, names: set[str], markers: Path) -> None:
    """A module named after each of `names` in `folder`, each leaving a file in `markers` when it runs."""
    for name in names:
        (folder / f"{name}.py").write_text(f"open({str(markers / name)!r}, 'w').write('ran')\n")


def test_no_module_planted_in_the_project_runs_in_the_guard_or_its_gate(rendered: Path, tmp_path: Path) -> None:
    (rendered / "bundle.tar").write_bytes(b"")
    (rendered / "tool.py").write_text("print('hello')\n")
    names = imported_modules(rendered)
    assert {"json", "re", "llm_finetuning"} <= names
    markers = tmp_path / "markers"
    markers.mkdir()
    plant(rendered, names, markers)  # the project, which is the hook's working directory and the brief's folder
    plant(rendered / "runs" / "r1", names, markers)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    answers = {}
    for tool, tool_input in CALLS:
        proc = run_hook(event(tool, tool_input, rendered), rendered, env)
        assert proc.returncode == 0, proc.stderr
        answers[tool_input.get("command") or tool] = proc.stdout.strip()
    assert sorted(p.name for p in markers.iterdir()) == [], answers
    assert answers["finetune launch runs/r1 --detach"] == "", answers  # the gate ran, unharmed, and passed


def test_the_hook_starts_python_isolated() -> None:
    text = (HOOKS / "guard").read_text()
    assert "exec python3 -I -S -c" in text
    tree = ast.parse((HOOKS / "guard.py").read_text())
    late = [f"line {node.lineno}" for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.ClassDef))
            for node in ast.walk(fn) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert late == [], "imports after start-up"


def test_the_record_writers_are_the_functions_the_package_marks() -> None:
    for info in pkgutil.walk_packages(llm_finetuning.__path__, "llm_finetuning."):
        if info.name.split(".")[1] in ("records", "fileio", "commands"):
            importlib.import_module(info.name)
    assert set(integrity.REGISTERED) == integrity.RECORD_WRITERS
    assert integrity.REGISTERED["write_record"] == "llm_finetuning.records.judge_calibration"


@pytest.mark.parametrize("writer", sorted(integrity.RECORD_WRITERS))
def test_a_file_calling_any_record_writer_is_denied(writer: str, tmp_path: Path) -> None:
    module = integrity.REGISTERED.get(writer, "llm_finetuning.records.inspection")
    if not module.startswith("llm_finetuning.records"):
        module = "llm_finetuning.records.inspection"  # fileio's writers, named beside the records API
    code = f"from {module} import {writer}\n{writer}('records/x.json', {{}})\n"
    reason = denied(hook(str(tmp_path / "forge.py"), tmp_path, tool="Write", content=code))
    assert "records API" in reason


def test_the_judge_calibration_writer_is_denied(tmp_path: Path) -> None:
    """A file calling `judge_calibration.write_record` was let through while the guard kept its own list."""
    code = ("from llm_finetuning.records.judge_calibration import write_record\n"
            "write_record('records/judge_calibration.json', {'judge': 'j', 'agreement': 1.0})\n")
    reason = denied(hook(str(tmp_path / "calibrate.py"), tmp_path, tool="Write", content=code))
    assert "records API" in reason and "calibrate.py" in reason


def test_the_package_code_the_guard_imports_is_guarded(tmp_path: Path) -> None:
    target = REPO / "src" / "llm_finetuning" / "integrity.py"
    reason = denied(hook(str(target), tmp_path, tool="Write", content="RECORD_WRITERS = frozenset()\n"))
    assert "code the llm-finetuning guard imports" in reason


def test_the_gate_runs_in_the_installed_finetunes_python_never_the_plugin_launcher(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HOOKS))
    import guard

    launcher, installed = tmp_path / "plugin-bin", tmp_path / "venv-bin"
    launcher.mkdir()
    installed.mkdir()
    (launcher / "finetune").write_text((REPO / "bin" / "finetune").read_text())
    (installed / "finetune").write_text("#!/opt/env/bin/python3.11\nfrom llm_finetuning.cli import main\nmain()\n")
    for exe in (launcher / "finetune", installed / "finetune"):
        exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{launcher}{os.pathsep}{installed}")
    monkeypatch.setenv("LLM_FINETUNING_VENV", str(tmp_path / "private"))
    commands = guard.gate_commands(tmp_path / "brief.yaml")
    assert [c[0] for c in commands] == ["/opt/env/bin/python3.11", sys.executable, f"{tmp_path}/private/bin/python"]
    assert all(c[1:5] == ["-I", "-m", "llm_finetuning.cli", "gate"] for c in commands)
