"""The package's one cache: its root folder, and the JSON files kept there by key.

The root is `$LLM_FINETUNING_CACHE`, else `$XDG_CACHE_HOME/llm-finetuning`, else `~/.cache/llm-finetuning`
(docs/development.md, "Caches"). Where that folder cannot be written (Claude Code's Bash sandbox mounts HOME and
`~/.cache` read-only and gives each command a writable `$TMPDIR`), the cache moves to
`$TMPDIR/llm-finetuning-cache` and says so once on stderr, naming the variable that puts it elsewhere.

A cached result is used only when its key matches; every key holds every file the result depends on (by path,
size and mtime, `fileio.stat_key`), so a changed file is a miss, never a stale answer. A cache that cannot be
read is a miss, and one that cannot be written only costs time. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeAlias, Union

from llm_finetuning.fileio import atomic_write_json
from llm_finetuning.jsonvalue import JsonObject, JsonValue

CacheKey: TypeAlias = Union[str, int, float, bool, None, "Sequence[CacheKey]", "Mapping[str, CacheKey]"]
"""What an entry depends on, as JSON: stats of files (`fileio.stat_key`), digests, versions. Compared as the JSON
it is written as, so a tuple and the list read back are one key."""
KeyOf: TypeAlias = Callable[[JsonValue], CacheKey]
"""A key computed from the stored value (an entry that lists the files it depends on is current while their
stats, taken now, are its key)."""

ENV = "LLM_FINETUNING_CACHE"
FALLBACK_NAME = "llm-finetuning-cache"
_noted: set[str] = set()  # roots already reported unwritable by this process


def preferred_root() -> Path:
    """$LLM_FINETUNING_CACHE, else $XDG_CACHE_HOME/llm-finetuning, else ~/.cache/llm-finetuning."""
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "llm-finetuning"


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)


def cache_root() -> Path:
    """The cache folder: `preferred_root()`, or `$TMPDIR/llm-finetuning-cache` when that cannot be written (said
    once on stderr)."""
    root = preferred_root()
    if _writable(root):
        return root
    fallback = Path(tempfile.gettempdir()) / FALLBACK_NAME
    if str(root) not in _noted:
        _noted.add(str(root))
        print(f"llm-finetuning: the cache folder {root} cannot be written; caching in {fallback} instead "
              f"(set {ENV} to a writable folder to choose)", file=sys.stderr, flush=True)
    return fallback


class CacheFile:
    """One JSON file in the cache, read and written whole: `read()` is None when absent or unreadable."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def path(self) -> Path:
        return cache_root() / self.name

    def read(self) -> JsonObject | None:
        """The file's JSON object; None when absent, unreadable, or not an object."""
        try:
            value = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def write(self, value: object) -> None:
        with contextlib.suppress(OSError, TypeError, ValueError):  # a cache that cannot be written only costs time
            atomic_write_json(self.path, value)


class KeyedEntries:
    """A cache file of entries by name, each used only while its key (what it depends on) is unchanged."""

    def __init__(self, name: str) -> None:
        self.file = CacheFile(name)

    def _entries(self) -> JsonObject:
        return self.file.read() or {}

    def get(self, name: str, key: CacheKey | KeyOf) -> JsonValue:
        """The value stored under `name` with this `key`, else None. `key` may be a function of the stored value
        (an entry that lists the files it depends on is current while their stats, taken now, are its key)."""
        hit = self._entries().get(name)
        if not isinstance(hit, dict) or "key" not in hit:
            return None
        try:
            want = key(hit.get("value")) if callable(key) else key
        except (TypeError, ValueError, OSError):
            return None
        return hit.get("value") if hit["key"] == _as_json(want) else None

    def put(self, name: str, key: CacheKey, value: object) -> None:
        """Store `value` (anything `json.dumps` writes) under `name` with `key`."""
        entries: dict[str, object] = dict(self._entries())
        entries[name] = {"key": _as_json(key), "value": value}
        self.file.write(entries)


def _as_json(key: CacheKey) -> JsonValue:
    """`key` as it reads back from the cache file: sequences as lists, mappings as dicts."""
    if isinstance(key, (str, int, float, bool)) or key is None:
        return key
    if isinstance(key, Mapping):
        return {str(k): _as_json(v) for k, v in key.items()}
    return [_as_json(v) for v in key]
