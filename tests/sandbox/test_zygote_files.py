"""The zygote's three files load the way the pool's stub loads them, and only that way.

The stub (`python -I -c "import sys; sys.path.insert(0, SANDBOX); import _zygote; del sys.path[0]; ..."`)
puts the sandbox folder on `sys.path` for one import. So `_zygote`, `_isolation` and `_job` import only the
standard library and one another, one another at module level only (a later import would search a `sys.path`
without the folder), and no file of the folder is named like a standard module (it would shadow that module
while the folder is on `sys.path`). Read with `ast`, and checked in a fresh interpreter started like a zygote.
"""

from __future__ import annotations

import ast
import subprocess
import sys

from llm_finetuning.sandbox import pool

SANDBOX = pool.ZYGOTE.parent
ZYGOTE_FILES = ("_zygote", "_isolation", "_job")


def _imports(name: str) -> list[tuple[str, bool, int]]:
    """(top-level module imported, at module level, line) for every import of SANDBOX/name.py."""
    tree = ast.parse((SANDBOX / f"{name}.py").read_text(encoding="utf-8"))
    found: list[tuple[str, bool, int]] = []

    def walk(node: ast.AST, module_level: bool) -> None:
        for child in ast.iter_child_nodes(node):
            level = module_level and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((alias.name.split(".")[0], level, child.lineno) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                assert child.level == 0, f"{name}.py:{child.lineno}: a relative import cannot work in the zygote"
                found.append(((child.module or "").split(".")[0], level, child.lineno))
            walk(child, level)

    walk(tree, True)
    return found


def test_the_zygote_files_import_the_standard_library_and_one_another_only() -> None:
    outside = [f"{name}.py:{line} imports {module}" for name in ZYGOTE_FILES for module, _, line in _imports(name)
               if module not in sys.stdlib_module_names and module not in ZYGOTE_FILES]
    assert not outside, "the zygote runs the standard library only:\n" + "\n".join(outside)


def test_the_zygote_files_import_one_another_while_the_stub_has_the_folder_on_sys_path() -> None:
    late = [f"{name}.py:{line} imports {module} inside a function" for name in ZYGOTE_FILES
            for module, module_level, line in _imports(name) if module in ZYGOTE_FILES and not module_level]
    assert not late, "\n".join(late)


def test_no_file_of_the_sandbox_folder_shadows_a_standard_module() -> None:
    shadowing = sorted(p.name for p in SANDBOX.glob("*.py") if p.stem in sys.stdlib_module_names)
    assert not shadowing


def test_the_stub_loads_all_three_and_leaves_sys_path_as_it_was() -> None:
    assert pool._ZYGOTE_STUB.endswith("_zygote.main()")
    probe = pool._ZYGOTE_STUB.replace(
        "_zygote.main()",
        f"print(sorted(m for m in sys.modules if m in {ZYGOTE_FILES!r}), {str(SANDBOX)!r} in sys.path)")
    out = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, cwd="/", timeout=60).stdout
    assert out.strip() == f"{sorted(ZYGOTE_FILES)!r} False"
