"""Host side of the sandbox: a pre-started zygote process and a thread that matches its replies to jobs.

The zygote is a fresh interpreter (`python -I _zygote.py`), spawned with an empty environment, so it is
clean however much torch/CUDA state the caller holds; it forks one isolated job per completion. One pool
per process is shared by every reward (`get_pool`); it restarts itself after a fork of the caller or a
death of the zygote.
"""

from __future__ import annotations

import atexit
import base64
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_finetuning.sandbox import cgroup

ZYGOTE = Path(__file__).with_name("_zygote.py")


@dataclass(frozen=True)
class Limits:
    """Per-job limits. timeout_s is the wall-clock budget for one completion (solution and all tests)."""

    timeout_s: float = 10.0
    memory_mb: int = 512
    file_mb: int = 16
    disk_mb: int = 32
    nofile: int = 64
    nproc: int = 32
    output_bytes: int = 1 << 20
    record_bytes: int = 4 << 20

    def to_json(self) -> dict[str, Any]:
        return {
            "timeout_s": self.timeout_s,
            "cpu_s": int(self.timeout_s) + 1,
            "memory_mb": self.memory_mb,
            "file_mb": self.file_mb,
            "disk_mb": self.disk_mb,
            "nofile": self.nofile,
            "nproc": self.nproc,
            "output_bytes": self.output_bytes,
            "record_bytes": self.record_bytes,
        }


@dataclass
class JobResult:
    """What came back from one job: status (ok | timeout | overflow | error) and the raw record bytes."""

    status: str
    records: bytes = b""
    detail: str = ""


@dataclass
class Isolation:
    """The zygote's own report of what it set up."""

    tier: str  # "namespaces" | "basic"
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.tier in ("namespaces", "basic") and bool(self.facts.get("seccomp_denied"))


class SandboxError(RuntimeError):
    pass


class SandboxPool:
    """A zygote serving up to `max_jobs` concurrent jobs. Thread-safe; `run_many` blocks."""

    def __init__(self, max_jobs: int | None = None, isolation: str = "auto", max_pids: int = 1024,
                 max_memory_bytes: int | None = None) -> None:
        self.max_jobs = max_jobs or max(2, 2 * (os.cpu_count() or 1))
        ram = cgroup.physical_memory_bytes()
        # Default: half the machine's memory for the whole pool, so jobs can never starve the host.
        self.max_memory_bytes = max_memory_bytes or (ram // 2 if ram else None)
        self.isolation_wanted = isolation
        self.max_pids = max_pids
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._pending: dict[int, Future[JobResult]] = {}
        self._ids = itertools.count(1)
        self._pid = -1
        self._cgroup: Path | None = None
        self._memory_cgroup: Path | None = None
        self._stderr: Any = None
        self.isolation: Isolation | None = None

    @property
    def cgroup_path(self) -> Path | None:
        """The pids cgroup that holds the zygote and every job, where one could be made."""
        return self._cgroup

    @property
    def memory_cgroup_path(self) -> Path | None:
        return self._memory_cgroup

    @property
    def zygote_pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Isolation:
        with self._lock:
            return self._ensure_started()

    def _ensure_started(self) -> Isolation:
        if self._proc is not None and self._pid == os.getpid() and self._proc.poll() is None:
            assert self.isolation is not None
            return self.isolation
        if self._pid != os.getpid():  # forked caller: the old pipes belong to the parent
            self._proc, self._pending = None, {}
        name = f"llmft-sandbox-{os.getpid()}-{id(self):x}"
        self._cgroup = cgroup.make_pids_cgroup(name, self.max_pids)
        self._memory_cgroup = (cgroup.make_cgroup("memory", name, self.max_memory_bytes)
                               if self.max_memory_bytes else None)
        config = {
            "max_jobs": self.max_jobs,
            "isolation": self.isolation_wanted,
            "pids_cgroup": str(self._cgroup) if self._cgroup else None,
            "memory_cgroup": str(self._memory_cgroup) if self._memory_cgroup else None,
        }
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the zygote
        proc = subprocess.Popen(
            [sys.executable, "-I", str(ZYGOTE), json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            cwd="/",
            close_fds=True,
            start_new_session=True,
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()
        try:
            hello = json.loads(first)
        except ValueError:
            proc.kill()
            proc.wait()
            self._stderr.seek(0)
            raise SandboxError(f"sandbox zygote failed to start: {self._stderr.read()[-2000:]!r}") from None
        if not hello.get("ready"):
            proc.wait()
            raise SandboxError(f"sandbox zygote refused to start: {hello.get('error')}")
        self._proc, self._pid = proc, os.getpid()
        self.isolation = Isolation(hello["tier"], hello["facts"])
        threading.Thread(target=self._reader, args=(proc,), daemon=True, name="sandbox-reader").start()
        return self.isolation

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None or self._pid != os.getpid():
            return
        try:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        # The zygote's namespace may take a moment to empty after its outer process has exited.
        for path in (self._cgroup, self._memory_cgroup):
            deadline = time.monotonic() + 5
            while path is not None and not cgroup.remove(path) and time.monotonic() < deadline:
                time.sleep(0.02)

    def _reader(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                msg = json.loads(line)
                fut = self._pending.pop(int(msg["id"]), None)
                result = JobResult(msg["status"], base64.b64decode(msg.get("records", "")), msg.get("detail", ""))
            except (ValueError, KeyError, TypeError):
                continue
            if fut is not None:
                fut.set_result(result)
        # The zygote is gone: every job still waiting fails (the parent scores it 0).
        with self._lock:
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            fut.set_result(JobResult("error", b"", "sandbox zygote exited"))

    # ------------------------------------------------------------------ jobs
    def submit(self, job: dict[str, Any], limits: Limits) -> Future[JobResult]:
        fut: Future[JobResult] = Future()
        with self._lock:
            self._ensure_started()
            job_id = next(self._ids)
            self._pending[job_id] = fut
            line = json.dumps({**job, "id": job_id, "limits": limits.to_json()}) + "\n"
            assert self._proc is not None and self._proc.stdin is not None
            try:
                self._proc.stdin.write(line.encode())
                self._proc.stdin.flush()
            except OSError:
                self._pending.pop(job_id, None)
                fut.set_result(JobResult("error", b"", "sandbox zygote is not accepting jobs"))
        return fut

    def run_many(self, jobs: list[dict[str, Any]], limits: Limits) -> list[JobResult]:
        futures = [self.submit(job, limits) for job in jobs]
        return [f.result() for f in futures]


_POOL: SandboxPool | None = None
_POOL_LOCK = threading.Lock()


def get_pool() -> SandboxPool:
    """The process-wide pool (started on first use; closed at exit)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            isolation = os.environ.get("LLM_FINETUNING_SANDBOX", "auto")
            _POOL = SandboxPool(isolation=isolation)
            atexit.register(_POOL.close)
        return _POOL
