"""Child cgroups (v1 or v2) nested under the caller's own, where the kernel lets us write them.

Used twice: the sandbox pool puts its zygote (and so every job) in a pids cgroup and a memory cgroup (a
cap on every process and byte the sandbox can ever hold), and the test suite puts itself in a pids
cgroup before any hostile case runs (the second wall). Where cgroups are absent or read-only, these
return None and the callers rely on rlimits alone.
"""

from __future__ import annotations

import os
from pathlib import Path

_LIMIT_FILES = {"pids": ("pids.max", "pids.max"), "memory": ("memory.limit_in_bytes", "memory.max")}


def _own_cgroup(controller: str) -> tuple[Path, bool] | None:
    """(the caller's cgroup directory for `controller`, whether it is cgroup v2)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if controller in controllers.split(","):
            base = Path("/sys/fs/cgroup") / controller
            return (base / rel.lstrip("/"), False) if base.is_dir() else None
    for line in lines:
        hid, controllers, rel = line.split(":", 2)
        if hid == "0" and controllers == "":
            base = Path("/sys/fs/cgroup")
            try:
                available = (base / "cgroup.controllers").read_text().split()
            except OSError:
                return None
            return (base / rel.lstrip("/"), True) if controller in available else None
    return None


def make_cgroup(controller: str, name: str, limit: int) -> Path | None:
    """Create `<own cgroup>/<name>` for `controller` ("pids" or "memory") with its limit set."""
    own = _own_cgroup(controller)
    if own is None:
        return None
    parent, v2 = own
    path = parent / name
    try:
        path.mkdir(exist_ok=True)
        (path / _LIMIT_FILES[controller][1 if v2 else 0]).write_text(str(limit))
    except OSError:
        remove(path)
        return None
    return path


def make_pids_cgroup(name: str, max_pids: int) -> Path | None:
    return make_cgroup("pids", name, max_pids)


def physical_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def join(path: Path, pid: int | None = None) -> None:
    (path / "cgroup.procs").write_text(str(pid if pid is not None else os.getpid()))


def remove(path: Path) -> bool:
    """Remove an (empty) cgroup; moves nothing. False when processes are still in it."""
    try:
        path.rmdir()
        return True
    except OSError:
        return False


def leave(path: Path) -> None:
    """Move the calling process back to the parent cgroup, then remove `path` if it is empty."""
    try:
        (path.parent / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return
    remove(path)
