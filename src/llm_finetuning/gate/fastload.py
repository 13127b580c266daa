"""Load a brief for the gate, skipping the JSON Schema validation when this exact brief was valid before.

`finetune check`'s validation imports jsonschema (about 135 ms, half the gate's budget). The result of
`check_brief` depends only on the brief's text, the brief package's code and schema, the reward registry,
and the files the brief names (data files, a local model directory, custom reward, tool and environment
modules next to the brief, the episode's chat template). When all of those are byte-for-byte (or stat-for-stat) what they were when the brief last passed,
the earlier verdict stands and the YAML parsed then is reused; otherwise the full `load_brief` runs and a
pass is remembered. Only passes are cached, so an invalid brief is always reported in full.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import llm_finetuning
from llm_finetuning.brief import Brief
from llm_finetuning.cache import CacheFile
from llm_finetuning.errors import Problem
from llm_finetuning.fileio import sha256_bytes

PACKAGE_DIR = Path(llm_finetuning.__file__).resolve().parent
# The code `check_brief` runs: the whole brief package with its schema, the reward registry, models, and the
# foundation modules they import.
CODE_FILES = (*sorted(p.relative_to(PACKAGE_DIR).as_posix() for p in (PACKAGE_DIR / "brief").glob("*")
                      if p.suffix in (".py", ".json")),
              "reward_registry.py", "models.py",
              # what those import from the package: a changed Problem, file reader or cache is a changed check
              "errors.py", "fileio.py", "integrity.py", "jsonvalue.py", "cache.py")


def _stat(p: Path) -> str:
    try:
        st = p.stat()
    except OSError:
        return f"{p}:absent"
    kind = "dir" if p.is_dir() else "file"
    return f"{p}:{kind}:{st.st_size}:{st.st_mtime_ns}"


def _section(raw: Mapping[str, object], key: str) -> Mapping[str, object]:
    value = raw.get(key)
    return value if isinstance(value, dict) else {}


def _named_paths(raw: Mapping[str, object], folder: Path) -> list[Path] | None:
    """Every path `check_brief` looks at for this brief, or None when one cannot be pinned down."""
    paths: list[Path] = []
    data = _section(raw, "data")
    for key in ("train", "eval"):
        ref = data.get(key)
        if isinstance(ref, str):
            paths += [folder / ref, Path(ref).expanduser()]
    model = _section(raw, "model")
    mid = model.get("id")
    if isinstance(mid, str):
        paths += [folder / mid, Path(mid).expanduser()]
        gguf = model.get("gguf_file")
        if isinstance(gguf, str):
            paths += [folder / mid / gguf, Path(mid).expanduser() / gguf]
    rewards = raw.get("rewards")
    refs = [spec.get("fn") for spec in (rewards if isinstance(rewards, list) else []) if isinstance(spec, dict)]
    episode = _section(raw, "episode")
    tools = episode.get("tools")
    refs += list(tools if isinstance(tools, list) else []) + [episode.get("environment")]
    template = episode.get("chat_template")
    if isinstance(template, str):
        paths += [folder / template, Path(template).expanduser()]
    for ref in refs:
        if isinstance(ref, str) and ":" in ref:
            module = ref.partition(":")[0]
            candidate = folder / Path(*[p or "_" for p in module.split(".")]).with_suffix(".py")
            if not candidate.is_file():
                return None  # found on sys.path: not worth pinning down
            paths.append(candidate)
    return paths


def _cache_key(path: Path, text: str, raw: Mapping[str, object]) -> str | None:
    named = _named_paths(raw, path.parent)
    if named is None:
        return None
    parts = [llm_finetuning.__version__, str(path), text]
    parts += [_stat(PACKAGE_DIR / f) for f in CODE_FILES]
    parts += [_stat(p) for p in named]
    return sha256_bytes(json.dumps(parts).encode())


def _entry(path: Path, data: bytes) -> CacheFile:
    name = sha256_bytes(str(path).encode() + b"\0" + data)
    return CacheFile(f"valid-briefs/{name}.json")


def _cached_brief(path: Path) -> Brief | None:
    """The brief from the cache when these exact bytes passed before and nothing they name changed."""
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
        entry = _entry(path, data).read()
    except (OSError, UnicodeDecodeError):
        return None
    if entry is None:
        return None
    raw, defaulted = entry.get("raw"), entry.get("data")
    if not isinstance(raw, dict) or not isinstance(defaulted, dict) or entry.get("key") != _cache_key(path, text, raw):
        return None
    return Brief.of(path, raw, sha256_bytes(data), text, defaulted=defaulted)


def _remember(path: Path, brief: Brief) -> None:
    """Cache a valid brief's parsed YAML and defaulted data (when they survive JSON unchanged) with its key.

    The key covers the schema file, so the cached defaults change when the schema's do."""
    raw = brief.as_mapping(defaulted=False)
    key = _cache_key(path, brief.text, raw)
    entry = {"key": key, "raw": raw, "data": brief.as_mapping()}
    try:
        if key is None or json.loads(json.dumps(entry)) != entry:
            return  # a custom module off the brief's folder, or YAML values JSON cannot hold (dates, int keys)
    except (TypeError, ValueError):
        return
    _entry(path, brief.text.encode("utf-8")).write(entry)


def load_brief_for_gate(path: Path) -> tuple[Brief | None, list[Problem]]:
    """Like `llm_finetuning.brief.load_brief`, with the cached fast path described above (on a hit,
    neither PyYAML nor jsonschema is imported)."""
    path = Path(path)
    cached = _cached_brief(path.resolve())
    if cached is not None:
        return cached, []
    from llm_finetuning.brief import load_brief

    loaded, errors = load_brief(path)  # raises UnusableInput for unreadable YAML
    if loaded is not None:
        _remember(path.resolve(), loaded)
    return loaded, errors
