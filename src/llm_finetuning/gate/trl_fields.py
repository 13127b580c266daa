"""The field names of the installed TRL's `GRPOConfig`, read from its source without importing TRL.

`from trl import GRPOConfig` takes seconds (it imports torch and transformers). Instead this parses
trl/trainer/grpo_config.py with `ast`, follows the class's bases (TRL's `_BaseConfig`, then
transformers' `TrainingArguments` in transformers/training_args.py) and collects the annotated class
attributes, i.e. the dataclass fields. Files are located from the top-level packages' specs, which
`importlib.util.find_spec` finds without executing anything. The list is kept in the package's cache
(`llm_finetuning.cache`), keyed by the path, size and mtime of every file read.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from llm_finetuning.cache import KeyedEntries
from llm_finetuning.fileio import sha256_bytes
from llm_finetuning.jsonvalue import JsonValue

_CACHE = KeyedEntries("grpo-config-fields.json")
# Names re-exported by a package's lazy __init__: where their class is defined.
KNOWN_LOCATIONS = {("transformers", "TrainingArguments"): "training_args.py"}


class FieldsUnavailable(Exception):
    """TRL (or a file it builds on) is not installed or cannot be parsed."""


def package_dir(name: str) -> Path:
    """Folder of an installed top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise FieldsUnavailable(f"{name} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _module_file(root: Path, dotted: str) -> Path:
    p = root.joinpath(*dotted.split(".")) if dotted else root
    return p.with_suffix(".py") if p.with_suffix(".py").is_file() else p / "__init__.py"


def _class_fields(file: Path, class_name: str, seen: list[Path]) -> set[str]:
    """Annotated attributes of `class_name` in `file` and of every base it can follow."""
    seen.append(file)
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        raise FieldsUnavailable(f"cannot parse {file}: {exc}") from None
    imports: dict[str, tuple[int, str, str]] = {}  # local name -> (level, module, original name)
    cls: ast.ClassDef | None = None
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                imports[alias.asname or alias.name] = (node.level, node.module or "", alias.name)
        elif isinstance(node, ast.ClassDef) and node.name == class_name:
            cls = node
    if cls is None:
        raise FieldsUnavailable(f"{file} defines no class {class_name}")
    fields = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    for base in cls.bases:
        if not isinstance(base, ast.Name) or base.id in ("object", "Generic"):
            continue
        if base.id not in imports:
            fields |= _class_fields(file, base.id, seen)
            continue
        level, module, original = imports[base.id]
        if level:
            root = file.parent
            for _ in range(level - 1):
                root = root.parent
            target = _module_file(root, module)
        else:
            top, _, rest = module.partition(".")
            known = KNOWN_LOCATIONS.get((module, original))
            target = package_dir(top) / known if known else _module_file(package_dir(top), rest)
        fields |= _class_fields(target, original, seen)
    return fields


def _key(files: list[Path]) -> str:
    parts = []
    for f in files:
        st = f.stat()
        parts.append(f"{f}:{st.st_size}:{st.st_mtime_ns}")
    return sha256_bytes("\n".join(parts).encode())


def _stored_key(hit: JsonValue) -> str:
    """The key of a stored entry, from the files it lists as read (TypeError when it lists none)."""
    files = hit.get("files") if isinstance(hit, dict) else None
    if not isinstance(files, list):
        raise TypeError("a cached entry without its files")
    return _key([Path(str(f)) for f in files])


def grpo_config_fields() -> frozenset[str]:
    """Field names of the installed TRL's GRPOConfig (cached by file path, size and mtime)."""
    trl = package_dir("trl")
    entry = trl / "trainer" / "grpo_config.py"
    if not entry.is_file():
        raise FieldsUnavailable(f"{entry} does not exist (an unexpected TRL layout)")
    current = _CACHE.get(str(entry), _stored_key)
    cached = current.get("fields") if isinstance(current, dict) else None
    if isinstance(cached, list):
        return frozenset(str(f) for f in cached)
    seen: list[Path] = []
    fields = _class_fields(entry, "GRPOConfig", seen)
    files = list(dict.fromkeys(seen))
    _CACHE.put(str(entry), _key(files), {"files": [str(f) for f in files], "fields": sorted(fields)})
    return frozenset(fields)
