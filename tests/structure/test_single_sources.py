"""Each contract lives in one place, checked from the source: file writes and hashes in `llm_finetuning.fileio`,
reward names and argument defaults in `reward_registry`, and the package's own modules imported plainly.
(Layers and private names: test_layers.py.)"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

import llm_finetuning
from llm_finetuning import reward_registry as registry

PACKAGE = Path(llm_finetuning.__file__).resolve().parent
# hooks/guard.py runs under `python3 -S` without the package: standard library only, on purpose
SELF_CONTAINED = {"hooks/guard.py"}
FILE_MODULE = "fileio.py"
# os.replace / mkdtemp that are moves or scratch folders, not a second atomic writer: (file, function)
NOT_WRITERS = {
    ("rundir/checkpoints.py", "set_aside_incomplete"),  # renames an uncommitted checkpoint folder aside
    ("export/folder.py", "export_model"),  # moves the merged model's files into the export being built
    ("sandbox/_zygote.py", "start_job"),  # the untrusted job's scratch working directory
    ("broker/__init__.py", "__init__"),  # the folder the broker's jobs write their stdout and stderr to
}
WRITER_CALLS = {("os", "replace"), ("os", "fsync"), ("tempfile", "mkstemp"), ("tempfile", "mkdtemp")}


def modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel not in SELF_CONTAINED:
            yield rel, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def functions_with_calls(tree: ast.AST, name: str = "<module>") -> Iterator[tuple[str, ast.Call]]:
    """(name of the innermost enclosing function, call) for every call in the module."""
    for node in ast.iter_child_nodes(tree):
        inner = node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else name
        if isinstance(node, ast.Call):
            yield name, node
        yield from functions_with_calls(node, inner)


def dotted(node: ast.expr) -> tuple[str, str] | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id, node.attr
    return None


def test_only_the_file_module_writes_atomically() -> None:
    found = []
    for rel, tree in modules():
        if rel == FILE_MODULE:
            continue
        for where, call in functions_with_calls(tree):
            if dotted(call.func) in WRITER_CALLS and (rel, where) not in NOT_WRITERS:
                found.append(f"{rel}:{call.lineno} {where}: {'.'.join(dotted(call.func) or ())}")
    assert not found, "write through llm_finetuning.fileio (atomic_write_*, folder_swap, fsync_*):\n" + "\n".join(found)


def test_the_allowed_moves_still_exist() -> None:
    """Each entry of NOT_WRITERS names a function that still makes such a call (no stale exemptions)."""
    seen = {(rel, where) for rel, tree in modules() for where, call in functions_with_calls(tree)
            if dotted(call.func) in WRITER_CALLS}
    assert seen >= NOT_WRITERS, sorted(NOT_WRITERS - seen)


def test_only_the_file_module_hashes_files() -> None:
    """A function that both opens or reads a file and calls hashlib.sha256 is a second file hash; a one-shot
    `hashlib.sha256(data)` is a second `sha256_bytes`. (An incremental digest over many parts is allowed.)"""
    found = []
    for rel, tree in modules():
        if rel in (FILE_MODULE, "integrity.py"):  # integrity hashes files for fileio and the plugin's guard alike
            continue
        found += [f"{rel}:{c.lineno} hashlib.sha256(...): use fileio.sha256_bytes" for c in ast.walk(tree)
                  if isinstance(c, ast.Call) and dotted(c.func) == ("hashlib", "sha256") and c.args]
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            calls = [c for c in ast.walk(node) if isinstance(c, ast.Call)]
            hashes = any(dotted(c.func) == ("hashlib", "sha256") for c in calls)
            reads = any((isinstance(c.func, ast.Name) and c.func.id == "open")
                        or (isinstance(c.func, ast.Attribute) and c.func.attr in ("open", "read_bytes")) for c in calls)
            if hashes and reads:
                found.append(f"{rel}:{node.lineno} {node.name}")
    assert not found, "hash files with llm_finetuning.fileio.sha256_file:\n" + "\n".join(found)


def test_own_modules_are_imported_plainly() -> None:
    """No `importlib.import_module("llm_finetuning...")` and no ImportError fallback around our own imports:
    a renamed function must fail loudly, not silently take a weaker path."""
    found = []
    for rel, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and dotted(node.func) == ("importlib", "import_module"):
                arg = node.args[0] if node.args else None
                literal = isinstance(arg, ast.Constant) and str(arg.value).startswith("llm_finetuning")
                if literal:
                    found.append(f"{rel}:{node.lineno} importlib.import_module({arg.value!r})")  # type: ignore[union-attr]
            if isinstance(node, ast.Try):
                caught = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
                if not any("ImportError" in c or "AttributeError" in c for c in caught):
                    continue
                own = [n for stmt in node.body for n in ast.walk(stmt)
                       if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("llm_finetuning")]
                if own:
                    found.append(f"{rel}:{node.lineno} catches {', '.join(sorted(caught))} around an import of "
                                 f"{own[0].module}")
    assert not found, "\n".join(found)


def test_reward_names_have_one_source() -> None:
    """`fn#2` is spelled in reward_registry only (reward_name, name_occurrence)."""
    found = []
    for rel, tree in modules():
        if rel == "reward_registry.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                for before, after in zip(node.values, node.values[1:], strict=False):
                    if (isinstance(before, ast.FormattedValue) and isinstance(after, ast.Constant)
                            and str(after.value).startswith("#")):
                        found.append(f"{rel}:{node.lineno} builds a `name#n` string")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    "rpartition", "partition", "split") and node.args and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value == "#":
                found.append(f"{rel}:{node.lineno} parses a `name#n` string")
    assert not found, "use reward_registry.reward_name / reward_names / name_occurrence:\n" + "\n".join(found)


@pytest.mark.parametrize("fn", sorted(registry.BUILTINS))
def test_reward_class_defaults_come_from_the_registry(fn: str) -> None:
    """Every keyword default of a built-in reward class that the schema also defaults is read from the
    registry (`_DEFAULTS[...]`), and equals it."""
    import importlib

    module_name, _, cls_name = registry.BUILTINS[fn][0].partition(":")
    module = importlib.import_module(module_name)
    cls = getattr(module, cls_name)
    defaults = registry.arg_defaults(fn)
    tree = ast.parse(inspect.getsource(cls))
    init = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    args = init.args.args[len(init.args.args) - len(init.args.defaults):] + init.args.kwonlyargs
    nodes = dict(zip([a.arg for a in args], list(init.args.defaults) + list(init.args.kw_defaults), strict=True))
    signature = inspect.signature(cls)
    for arg, value in defaults.items():
        node = nodes.get(arg)
        if node is None and value is None and signature.parameters[arg].default is inspect.Parameter.empty:
            continue  # required by the class; build_reward fills it (length_penalty's max_length)
        assert node is not None and ast.unparse(node) == f"_DEFAULTS[{arg!r}]", \
            f"{module_name}.{cls_name}.__init__ {arg}: default is {ast.unparse(node) if node else 'missing'}"
        assert signature.parameters[arg].default == value
    assert defaults == module._DEFAULTS


def test_defaults_are_collected_in_the_registry_only() -> None:
    """No second `{k: v["default"] ...}` over a reward schema outside reward_registry (the brief's own schema
    defaults live in brief/)."""
    found = []
    for rel, tree in modules():
        if rel == "reward_registry.py" or rel.startswith("brief/"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.DictComp) and isinstance(node.value, ast.Subscript) \
                    and isinstance(node.value.slice, ast.Constant) and node.value.slice.value == "default":
                found.append(f"{rel}:{node.lineno}")
    assert not found, "use reward_registry.arg_defaults:\n" + "\n".join(found)


def run_dir_file_names() -> set[str]:
    """The file names `llm_finetuning.rundir` owns (its constants with a dot: `launch.pid`, `metrics.jsonl`, ...).
    The folder names `model` and `checkpoints` are also brief keys and grpo values, so no check can tell them apart."""
    import llm_finetuning.rundir as rundir

    return {v for k, v in vars(rundir).items() if k.isupper() and isinstance(v, str) and "." in v}


def spelled_run_dir_names(tree: ast.Module, names: set[str]) -> list[tuple[int, str]]:
    """(line, literal) for each string literal, docstrings aside, that is one of `names` or a path ending in one."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                  and node.value.rsplit("/", 1)[-1] in names)


def test_run_directory_file_names_are_spelled_in_rundir_only() -> None:
    """Every module outside rundir/ names a run directory's files through its constants (`RUN_DIR / LAUNCH_PID`),
    so a renamed file is renamed in one place; a message or a docstring may still say `launch.pid`."""
    names = run_dir_file_names()
    assert {"manifest.json", "metrics.jsonl", "launch.pid", "launch.log", "launch.exit.json", "launch.sh"} <= names
    found = [f"{rel}:{line} {value!r}" for rel, tree in modules()
             if not rel.startswith("rundir/") and rel != "integrity.py"  # the manifest's name, shared with the guard
             for line, value in spelled_run_dir_names(tree, names)]
    assert not found, "use the constants of llm_finetuning.rundir:\n" + "\n".join(found)


def test_the_run_directory_name_check_sees_a_literal() -> None:
    """A name, a path ending in one, an f-string that builds such a path; not a docstring or a message."""
    source = ('"""Reads launch.pid."""\n'
              'def f(run_dir):\n    """The launch.pid record."""\n'
              '    return (run_dir / "launch.pid", "runs/x/metrics.jsonl", f"{run_dir}/launch.log",\n'
              '            f"no launch.pid in {run_dir}", "launch")\n')
    assert spelled_run_dir_names(ast.parse(source), run_dir_file_names()) == [
        (4, "/launch.log"), (4, "launch.pid"), (4, "runs/x/metrics.jsonl")]
