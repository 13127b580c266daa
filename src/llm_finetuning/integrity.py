"""What the package and the plugin's guard (hooks/guard.py) share: file hashing, the check of a run's
manifest.json against the files it binds, and the names of the functions that write or seal records.

The guard imports this module in an isolated interpreter (`python3 -I -S`: no site-packages, no working
directory on sys.path) from the plugin's own `src/`, so it imports the standard library only, at module level,
and nothing else of the package. `fileio`, `rundir.manifest` and the record modules use the same code, so the
guard and `finetune launch` cannot disagree on what a manifest binds, nor on which functions write records.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar

if TYPE_CHECKING:  # the guard imports no module of the package at run time
    from llm_finetuning.jsonvalue import JsonObject, JsonValue

_CHUNK = 1 << 20
MANIFEST = "manifest.json"

# Every function of the package that writes a record, a record's samples or a trusted-keys file, or seals
# a record: the guard denies code that imports the records API and names one of them. Each is decorated
# with `writes_records` where it is defined, which refuses a name missing here; tests/hooks holds the list
# equal to the decorated functions and to every function of `records/` that writes a file.
RECORD_WRITERS = frozenset({
    "create_inspection", "set_verdict", "save_progress", "seal", "write_baseline", "write_record",
    "add_trusted_key", "atomic_write_bytes", "atomic_write_text", "atomic_write_json",
})
REGISTERED: dict[str, str] = {}  # name -> module, filled as the decorated functions are defined

F = TypeVar("F", bound=Callable[..., object])


def writes_records(fn: F) -> F:
    """Mark `fn` as a function that writes or seals records (its name must be in RECORD_WRITERS)."""
    if fn.__name__ not in RECORD_WRITERS:
        raise RuntimeError(f"{fn.__module__}.{fn.__name__} writes records but is not in integrity.RECORD_WRITERS")
    REGISTERED[fn.__name__] = fn.__module__
    return fn


def sha256_file(path: Path | str) -> str:
    """sha256 of a file's bytes, read in chunks (OSError when it cannot be read)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_file_or_none(path: Path | str) -> str | None:
    """`sha256_file`, or None when the file cannot be read."""
    try:
        return sha256_file(path)
    except OSError:
        return None


class Mismatch(NamedTuple):  # a NamedTuple: dataclasses costs the guard ~10 ms of imports
    """One thing a manifest binds that no longer holds. `kind`: missing_file, edited_file, brief_missing,
    brief_changed or record_changed; `key`: the rendered file's name, `brief` or `records.<key>`."""

    kind: str
    key: str
    path: Path


def manifest_fields(manifest: JsonValue) -> tuple[dict[str, str], str, str, JsonObject, str] | None:
    """(files, brief path, brief sha256, records, gate fingerprint) of a parsed manifest.json; None when it is
    not one `finetune render` wrote."""
    if not isinstance(manifest, dict):
        return None
    files, brief, records = manifest.get("files"), manifest.get("brief"), manifest.get("records", {})
    fingerprint = manifest.get("gate_fingerprint")
    if not (isinstance(files, dict) and isinstance(brief, dict) and isinstance(records, dict)):
        return None
    path, digest = brief.get("path"), brief.get("sha256")
    if not (isinstance(path, str) and isinstance(digest, str) and isinstance(fingerprint, str)):
        return None
    return {str(k): str(v) for k, v in files.items()}, path, digest, records, fingerprint


def read_manifest_json(run_dir: Path) -> JsonValue:
    """RUN_DIR/manifest.json parsed (OSError or ValueError when it cannot be read)."""
    value: JsonValue = json.loads((Path(run_dir) / MANIFEST).read_text(encoding="utf-8"))
    return value


def manifest_mismatches(run_dir: Path, files: dict[str, str], brief_path: str, brief_sha256: str,
                        records: JsonObject) -> list[Mismatch]:
    """Every rendered file, the brief and each record whose sha256 is no longer the one written at render time."""
    run_dir = Path(run_dir)
    out = []
    for name, digest in sorted(files.items()):
        path = run_dir / name
        if not path.is_file():
            out.append(Mismatch("missing_file", name, path))
        elif sha256_file_or_none(path) != digest:
            out.append(Mismatch("edited_file", name, path))
    brief = (run_dir / brief_path).resolve()
    if not brief.is_file():
        out.append(Mismatch("brief_missing", "brief", brief))
    elif sha256_file_or_none(brief) != brief_sha256:
        out.append(Mismatch("brief_changed", "brief", brief))
    for key, rec in sorted(records.items()):
        path = (run_dir / str(rec.get("path") if isinstance(rec, dict) else "")).resolve()
        now = sha256_file_or_none(path) if path.is_file() else None
        if not isinstance(rec, dict) or now != rec.get("sha256"):
            out.append(Mismatch("record_changed", f"records.{key}", path))
    return out
