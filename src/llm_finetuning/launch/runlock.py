"""One run per run directory, decided by a lock the run itself holds: `flock` on RUN_DIR/launch.lock.

A launch takes the lock exclusively (LOCK_EX | LOCK_NB) before it trains and keeps it for its whole life; a
second launch that cannot take it is refused and touches nothing. The lock belongs to an open file, not to a
process id, so it is judged the same way from any pid namespace (Claude Code's sandbox runs commands in one
of its own) and it ends with the last process that holds it, however that process ends (SIGKILL included).

Who holds it: `finetune launch RUN_DIR` in the foreground; with `--detach`, the launching command takes it and
hands the open file to the supervisor, which hands it to the plain launch it runs (`ENV_FD` names the
descriptor); a launch through launch.sh hands it to bash, and with it to `accelerate launch`. A worker whose
descriptor was closed on the way (accelerate starts workers with close_fds) finds `ENV_RUN` naming its run
and the lock held by that ancestor; a worker started by hand takes the lock itself on rank 0.

`is_held` asks with a shared lock (LOCK_SH | LOCK_NB) on a fresh open file: it succeeds only when no launch
holds the lock. The file holds the holder's pid, start time and command as JSON, for messages only: a pid
means something only in the holder's own pid namespace. Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from llm_finetuning.fileio import utc_now
from llm_finetuning.jsonvalue import JsonObject
from llm_finetuning.rundir import LAUNCH_LOCK

ENV_FD = "LLM_FINETUNING_RUN_LOCK_FD"  # the descriptor of the lock a parent launch handed down
ENV_RUN = "LLM_FINETUNING_RUN_LOCK"  # the run directory an ancestor holds the lock of
_CLAIM_RETRY_S = 0.5  # a concurrent `is_held` holds a shared lock for microseconds


@dataclass
class RunLock:
    """An open RUN_DIR/launch.lock holding LOCK_EX; `fd` is what a child process is handed."""

    run_dir: Path
    fd: int
    inherited: bool = False  # handed down by the launch that took it

    def describe(self, pid: int, command: str) -> None:
        """Write who holds the lock (read by the refusal of a second launch)."""
        data = json.dumps({"pid": pid, "started_at": utc_now(), "command": command}).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def child_env(self, env: dict[str, str]) -> dict[str, str]:
        """`env` for a child handed this lock (pass `fd` in its pass_fds)."""
        return {**env, ENV_FD: str(self.fd), ENV_RUN: str(self.run_dir)}

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _path(run_dir: Path) -> Path:
    return Path(run_dir).resolve() / LAUNCH_LOCK


def _inherited(run_dir: Path) -> RunLock | None:
    """The lock a parent launch handed down through ENV_FD, when that descriptor is RUN_DIR's lock file."""
    if not handed_down(run_dir):
        return None
    try:
        fd = int(os.environ.get(ENV_FD, ""))
        st, on_disk = os.fstat(fd), _path(run_dir).stat()
    except (ValueError, OSError):
        return None
    if (st.st_dev, st.st_ino) != (on_disk.st_dev, on_disk.st_ino):
        return None  # the number was closed on the way and reused for another file
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the same open file: succeeds only if it holds the lock
    except OSError:
        return None
    os.set_inheritable(fd, False)
    return RunLock(Path(run_dir).resolve(), fd, inherited=True)


def claim(run_dir: Path) -> RunLock | None:
    """The run's lock for this process: the one handed down by a parent launch, or a new one; None when
    another launch holds it."""
    inherited = _inherited(run_dir)
    if inherited is not None:
        return inherited
    fd = os.open(_path(run_dir), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    deadline = time.monotonic() + _CLAIM_RETRY_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return RunLock(Path(run_dir).resolve(), fd)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN) or time.monotonic() >= deadline:
                os.close(fd)
                return None
        time.sleep(0.02)


def is_held(run_dir: Path) -> bool:
    """A launch holds RUN_DIR's lock now (it trains, or verifies before training)."""
    try:
        fd = os.open(_path(run_dir), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def handed_down(run_dir: Path) -> bool:
    """This process was started by a launch of RUN_DIR that handed its lock down (ENV_RUN names RUN_DIR)."""
    return os.environ.get(ENV_RUN) == str(Path(run_dir).resolve())


def held_by_ancestor(run_dir: Path) -> bool:
    """This process was started by the launch that holds RUN_DIR's lock (its descriptor was closed on the way)."""
    return handed_down(run_dir) and is_held(run_dir)


def holder(run_dir: Path) -> JsonObject:
    """What the holder wrote about itself ({} when unreadable); its pid is the one its own namespace sees."""
    try:
        data = json.loads(_path(run_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
