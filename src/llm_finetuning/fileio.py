"""Files written so a crash never leaves half of one, and the sha256 of files and JSON: one place for both.

Every file the product writes goes through `atomic_write_bytes` (or its text and JSON forms): a temporary
file in the same folder, fsync, `os.replace`, then an fsync of the folder, so a reader sees the old file or
the new one, never half. A folder written whole (a model, an export) is filled under a private temporary
sibling and swapped in by `folder_swap`. Standard library only, imported by every layer; the gate's
read-only fast path imports nothing heavier than `hashlib` and `json` from here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from llm_finetuning.errors import UnusableInput

# the sha256 of a file is the guard's too (hooks/guard.py imports integrity alone)
from llm_finetuning.integrity import sha256_file as sha256_file
from llm_finetuning.integrity import sha256_file_or_none as sha256_file_or_none
from llm_finetuning.integrity import writes_records
from llm_finetuning.jsonvalue import JsonObject

MAX_RECORD_BYTES = 64 << 20


# --- places and names ------------------------------------------------------------------------------

def stat_key(path: Path) -> list[str | int]:
    """[path, size, mtime_ns] of a file or folder (size -1 when absent): a cache key part."""
    try:
        st = path.stat()
    except OSError:
        return [str(path), -1, 0]
    return [str(path), st.st_size, st.st_mtime_ns]


def shown(path: Path | str) -> str:
    """A path as messages show it: relative to the working directory when under it, else absolute."""
    p = Path(path)
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except (ValueError, OSError):
        return str(p)


def utc_now() -> str:
    """The time a file is written, as records carry it: `2026-12-01T15:00:00Z`."""
    from datetime import datetime, timezone  # lazy: the gate's fast path never writes a timestamp

    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# --- hashing ----------------------------------------------------------------------------------------

def canonical_json(obj: object) -> bytes:
    """The bytes hashed for bindings and seals: sorted keys, no whitespace, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(obj: object) -> str:
    """sha256 of `canonical_json(obj)`."""
    return sha256_bytes(canonical_json(obj))


# --- writing ----------------------------------------------------------------------------------------

@writes_records
def atomic_write_bytes(path: Path | str, data: bytes, mode: int | None = None) -> None:
    """Write `data` to `path` so that readers never see a partial file. The file is private (0600, as
    `mkstemp` makes it) unless `mode` is given."""
    import tempfile  # lazy: about 20 ms of imports the gate's read-only path does not need

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


@writes_records
def atomic_write_text(path: Path | str, text: str, mode: int | None = None) -> None:
    """`atomic_write_bytes` of `text` in UTF-8, newlines as given."""
    atomic_write_bytes(path, text.encode("utf-8"), mode)


@writes_records
def atomic_write_json(path: Path | str, obj: object) -> None:
    """A JSON object as records are written: indented, sorted keys, UTF-8, no NaN."""
    text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def fsync_file(path: Path) -> None:
    """fsync a file written by someone else (best effort: an unreadable file is skipped)."""
    try:
        with open(path, "rb") as fh:
            os.fsync(fh.fileno())
    except OSError:
        pass


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


def replace_folder(tmp: Path, dest: Path) -> None:
    """Swap the finished folder `tmp` in as `dest` (an older `dest` is removed first)."""
    import shutil

    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)
    fsync_dir(dest.parent)


@contextlib.contextmanager
def folder_swap(dest: Path) -> Iterator[Path]:
    """A temporary sibling of `dest` to fill; when the block ends without an error it becomes `dest` whole
    (readable by all, like any model folder), otherwise it is removed and `dest` is left as it was."""
    import shutil
    import tempfile

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}."))
    try:
        yield tmp
        tmp.chmod(0o755)  # mkdtemp makes it private
        replace_folder(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# --- reading ----------------------------------------------------------------------------------------

def read_json_or_none(path: Path | str) -> JsonObject | None:
    """The JSON object at `path`, or None when it is missing, unreadable or not an object (for optional
    facts read beside a run: a manifest, a diagnosis, a model's config.json)."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def read_json_object(path: Path | str, what: str, fix: str = "") -> JsonObject:
    """A JSON object from `path`, or UnusableInput saying why it cannot be read, with `fix` (what writes the
    file) or, without one, what to check."""
    path = Path(path)
    again = fix or f"write {path.name} again with the command that made it, or restore it from version control"
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise UnusableInput(f"{what} {path} does not exist",
                            fix or f"check the path: nothing named {path.name} is in {path.parent}", str(path)) from None
    if size > MAX_RECORD_BYTES:
        raise UnusableInput(f"{what} {path} is {size >> 20} MiB; records are small JSON files",
                            f"point at the {what} itself, not at a data or model file", str(path))
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UnusableInput(f"{what} {path} is not readable JSON ({exc})", again, str(path)) from None
    if not isinstance(obj, dict):
        raise UnusableInput(f"{what} {path} holds a {type(obj).__name__}, not a JSON object", again, str(path))
    return obj


# --- code that was verified ---------------------------------------------------------------------------

@contextlib.contextmanager
def compiled_from_source() -> Iterator[None]:
    """Modules imported inside are compiled from their source files, never loaded from a `__pycache__` beside
    them: whoever can write a folder can leave bytecode there that Python runs instead of the source (an
    unchecked-hash .pyc is never compared with it), so the code the gate hashed would not be the code that
    runs. The bytecode goes to a private temporary folder instead (`sys.pycache_prefix`)."""
    import sys
    import tempfile

    before = sys.pycache_prefix
    with tempfile.TemporaryDirectory(prefix="llm-finetuning-pycache-") as private:
        sys.pycache_prefix = private
        try:
            yield
        finally:
            sys.pycache_prefix = before

