"""Atomic writes, canonical JSON and sha256 helpers shared by the record formats.

Every record write goes through `atomic_write_bytes`: a temporary file in the same folder, fsync,
`os.replace`, then an fsync of the folder, so a reader sees the old record or the new one, never half.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from llm_finetuning.errors import UnusableInput

MAX_RECORD_BYTES = 64 << 20


def cache_dir() -> Path:
    """Where llm-finetuning keeps caches: $LLM_FINETUNING_CACHE, else ~/.cache/llm-finetuning."""
    root = os.environ.get("LLM_FINETUNING_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "llm-finetuning"


def stat_key(path: Path) -> list[Any]:
    """[path, size, mtime_ns] of a file or folder (size -1 when absent): a cache key part."""
    try:
        st = path.stat()
    except OSError:
        return [str(path), -1, 0]
    return [str(path), st.st_size, st.st_mtime_ns]


def canonical_json(obj: Any) -> bytes:
    """The bytes hashed for bindings and seals: sorted keys, no whitespace, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(obj: Any) -> str:
    return sha256_bytes(canonical_json(obj))


def sha256_file(path: Path) -> str | None:
    """sha256 of a file's bytes, or None when it cannot be read."""
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def shown(path: Path | str) -> str:
    """A path as messages show it: relative to the working directory when under it, else absolute."""
    p = Path(path)
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except (ValueError, OSError):
        return str(p)


def utc_now() -> str:
    from datetime import datetime, timezone  # lazy: the gate's fast path never writes a timestamp

    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers never see a partial file."""
    import tempfile  # lazy: about 20 ms of imports the gate's read-only path does not need

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename inside it survives a crash (best effort: some filesystems refuse)."""
    try:
        dfd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def atomic_write_json(path: Path, obj: Any) -> None:
    text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """A JSON object from `path`, or UnusableInput saying why it cannot be read."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise UnusableInput(f"{what} {path} does not exist", "", str(path)) from None
    if size > MAX_RECORD_BYTES:
        raise UnusableInput(f"{what} {path} is {size >> 20} MiB; records are small JSON files", "", str(path))
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UnusableInput(f"{what} {path} is not readable JSON ({exc})", "", str(path)) from None
    if not isinstance(obj, dict):
        raise UnusableInput(f"{what} {path} holds a {type(obj).__name__}, not a JSON object", "", str(path))
    return obj
