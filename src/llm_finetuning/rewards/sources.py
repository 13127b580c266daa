"""Which source files a reward's behaviour depends on, found without importing the reward code.

An inspection record binds each reward by the sha256 of these files, so an edit to the reward's code
makes the record stale. Built-in: its module plus every `llm_finetuning.rewards`/`llm_finetuning.sandbox`
module (and `llm_finetuning.reward_registry`) it imports or runs as a child process (`python -m <module>`),
transitively. Custom: the user's module plus the modules next to the brief that it imports, transitively.
Pure: reads files and parses them with `ast`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from llm_finetuning import reward_registry as registry

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # .../llm_finetuning
# A built-in's behaviour is its modules, the sandbox it runs code in, and the registry's argument defaults.
_FOLLOWED = ("llm_finetuning.rewards", "llm_finetuning.sandbox", "llm_finetuning.reward_registry")
_MODULE_NAME = re.compile(r"llm_finetuning\.(?:rewards|sandbox)(?:\.[A-Za-z_]\w*)+")


def _module_file(module: str, roots: list[tuple[str, Path]]) -> Path | None:
    for prefix, root in roots:
        if prefix and module != prefix and not module.startswith(prefix + "."):
            continue
        rel = module[len(prefix) + 1:] if prefix and module != prefix else ("" if prefix else module)
        base = root.joinpath(*rel.split(".")) if rel else root
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate.resolve()
    return None


def _imports(file: Path, package: str) -> set[str]:
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                base = ".".join(parts[: len(parts) - node.level + 1]) if node.level <= len(parts) + 1 else ""
                mod = ".".join(p for p in (base, node.module or "") if p)
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_NAME.fullmatch(node.value):
            found.add(node.value)  # a module run as a child process (`python -m llm_finetuning.rewards.x`)
    return found


def _closure(start: Path, start_module: str, roots: list[tuple[str, Path]], follow: tuple[str, ...]) -> list[Path]:
    seen: dict[Path, str] = {start.resolve(): start_module}
    queue = [(start.resolve(), start_module)]
    while queue:
        file, module = queue.pop()
        package = module if file.name == "__init__.py" else module.rpartition(".")[0]
        for name in sorted(_imports(file, package)):
            if follow and not any(name == f or name.startswith(f + ".") for f in follow):
                continue
            target = _module_file(name, roots)
            if target is not None and target not in seen:
                seen[target] = name
                queue.append((target, name))
    return sorted(seen)


def reward_source_files(fn: str, brief_folder: Path) -> list[Path]:
    """The source files whose sha256 bind a record to reward `fn` (empty when the code cannot be found)."""
    if registry.is_custom(fn):
        location, _ = registry.locate_custom(fn, Path(brief_folder))
        if location is None or location.file is None:
            return []
        folder = Path(brief_folder).resolve()
        roots = [("", folder)]
        inside = location.file.resolve().is_relative_to(folder)
        if not inside:
            return [location.file.resolve()]
        return _closure(location.file, location.module, roots, follow=())
    if fn not in registry.BUILTINS:
        return []
    module = registry.BUILTINS[fn][0].partition(":")[0]
    roots = [("llm_finetuning", _PACKAGE_ROOT)]
    start = _module_file(module, roots)
    if start is None:
        return []
    return _closure(start, module, roots, follow=_FOLLOWED)


def file_label(path: Path, brief_folder: Path) -> str:
    """A stable, readable name for a bound file: package-relative, brief-relative, or absolute."""
    p = path.resolve()
    for root, prefix in ((_PACKAGE_ROOT, "llm_finetuning/"), (brief_folder.resolve(), "")):
        try:
            return prefix + p.relative_to(root).as_posix()
        except ValueError:
            continue
    return p.as_posix()
