"""A pids cgroup (v1 or v2) nested under the caller's own, where the kernel lets us write one.

Used twice: the sandbox pool puts its zygote in one (a cap on every process the sandbox can ever make),
and the test suite puts itself in one before any hostile case runs (the second wall).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def _own_pids_cgroup() -> Path | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if "pids" in controllers.split(","):
            base = Path("/sys/fs/cgroup/pids")
            return base / rel.lstrip("/") if base.is_dir() else None
    for line in lines:
        hid, controllers, rel = line.split(":", 2)
        if hid == "0" and controllers == "":
            base = Path("/sys/fs/cgroup")
            here = base / rel.lstrip("/")
            if "pids" in (base / "cgroup.controllers").read_text(errors="replace").split():
                return here
    return None


def make_pids_cgroup(name: str, max_pids: int) -> Path | None:
    """Create `<own pids cgroup>/<name>` with pids.max; None where cgroups are absent or read-only."""
    parent = _own_pids_cgroup()
    if parent is None:
        return None
    path = parent / name
    try:
        path.mkdir(exist_ok=True)
        (path / "pids.max").write_text(str(max_pids))
    except OSError:
        with contextlib.suppress(OSError):
            path.rmdir()
        return None
    return path


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
