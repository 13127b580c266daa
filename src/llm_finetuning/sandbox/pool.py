"""Host side of the sandbox: a pre-started zygote process and a thread that matches its replies to jobs.

The zygote is a fresh interpreter (`python -I -c "import _zygote; ..."`), spawned with an empty
environment, so it is clean however much torch/CUDA state the caller holds; it (or its forker) forks one
isolated job per completion. One pool per process is shared by every reward (`get_pool`); it restarts
itself after a fork of the caller or a death of the zygote.
"""

from __future__ import annotations

import atexit
import itertools
import marshal
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from llm_finetuning.sandbox import cgroup

ZYGOTE = Path(__file__).with_name("_zygote.py")
# The zygote is imported, not run as a script: a script is compiled from source at every start, and
# the compiler's freed memory stays scattered over the heap (about 2.4 MB more that every job's fork
# copies and every exit tears down); an import loads the cached bytecode instead.
_ZYGOTE_STUB = (f"import sys; sys.path.insert(0, {str(ZYGOTE.parent)!r}); import _zygote; del sys.path[0]; "
                "_zygote.main()")


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

    def to_json(self) -> dict[str, float]:
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
    """The zygote's own report of what it set up; of its `facts` (walls, cgroups, errors met), only
    `seccomp_denied` is read here."""

    tier: str  # "namespaces" | "basic"
    facts: dict[str, object] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.tier in ("namespaces", "basic") and bool(self.facts.get("seccomp_denied"))


class SandboxError(RuntimeError):
    pass


def _read_frame(stream: IO[bytes]) -> object:
    """One frame from the zygote: a 4-byte big-endian length, then marshal data. Only the zygote (our own
    code) writes this stream; a job's bytes travel inside it as an opaque bytes value."""
    head = stream.read(4)
    if len(head) < 4:
        raise EOFError("the sandbox zygote closed its channel")
    n = int.from_bytes(head, "big")
    body = stream.read(n)
    if len(body) < n:
        raise EOFError("the sandbox zygote closed its channel mid-frame")
    return marshal.loads(body)


def _job_reply(frame: object) -> tuple[int, str, bytes]:
    """A job's reply frame, (job id, status, the job's raw record bytes); ValueError when it is not one."""
    if isinstance(frame, tuple) and len(frame) == 3:
        job_id, status, records = frame
        if isinstance(job_id, int) and isinstance(status, str) and isinstance(records, bytes):
            return job_id, status, records
    raise ValueError("not a job reply")


class _Zygote:
    """One zygote process, its pending jobs, and the thread that reads its replies."""

    def __init__(self, proc: subprocess.Popen[bytes], stderr: IO[bytes], isolation: Isolation, index: int) -> None:
        self.proc, self.stderr, self.isolation, self.index = proc, stderr, isolation, index
        self.pending: dict[int, Future[JobResult]] = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._reader, daemon=True, name="sandbox-reader").start()

    @classmethod
    def spawn(cls, config: dict[str, object], index: int) -> _Zygote:
        return cls.handshake(*cls.launch(config), index)

    @staticmethod
    def launch(config: dict[str, object]) -> tuple[subprocess.Popen[bytes], IO[bytes]]:
        """Start a zygote process without waiting for it (the pool starts all of them, then waits)."""
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the zygote
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _ZYGOTE_STUB, marshal.dumps(config).hex()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            cwd="/",
            close_fds=True,
            start_new_session=True,
        )
        return proc, stderr

    @classmethod
    def handshake(cls, proc: subprocess.Popen[bytes], stderr: IO[bytes], index: int) -> _Zygote:
        """Wait for a launched zygote's report; SandboxError when it failed or refused to start."""
        assert proc.stdout is not None
        try:
            hello = _read_frame(proc.stdout)
            if not isinstance(hello, dict):
                raise ValueError("not a report")
        except (ValueError, EOFError, TypeError):
            proc.kill()
            proc.wait()
            stderr.seek(0)
            raise SandboxError(f"sandbox zygote failed to start: {stderr.read()[-2000:]!r}") from None
        if not hello.get("ready"):
            proc.wait()
            raise SandboxError(f"sandbox zygote refused to start: {hello.get('error')}")
        tier, facts = hello.get("tier"), hello.get("facts")
        if not isinstance(tier, str) or not isinstance(facts, dict):
            proc.kill()
            proc.wait()
            raise SandboxError(f"sandbox zygote sent a report without its tier and facts: {hello!r}")
        return cls(proc, stderr, Isolation(tier, dict(facts)), index)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _reader(self) -> None:
        assert self.proc.stdout is not None
        while True:
            try:
                job_id, status, records = _job_reply(_read_frame(self.proc.stdout))
            except (ValueError, EOFError, TypeError):
                break
            with self.lock:
                fut = self.pending.pop(job_id, None)
            if fut is not None:
                fut.set_result(JobResult(status, records))
        # The zygote is gone: every job still waiting fails (the parent scores it 0).
        with self.lock:
            pending, self.pending = self.pending, {}
        for fut in pending.values():
            fut.set_result(JobResult("error", b"", "sandbox zygote exited"))

    def submit(self, batch: list[tuple[int, bytes, Future[JobResult]]]) -> None:
        """Send jobs in one write (one wake-up of the zygote for a whole batch)."""
        with self.lock:
            for job_id, _, fut in batch:
                self.pending[job_id] = fut
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(b"".join(frame for _, frame, _ in batch))
            self.proc.stdin.flush()
        except OSError:
            with self.lock:
                lost = [self.pending.pop(job_id, None) for job_id, _, _ in batch]
            for waiting in lost:
                if waiting is not None:
                    waiting.set_result(JobResult("error", b"", "sandbox zygote is not accepting jobs"))

    def close(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


class SandboxPool:
    """`zygotes` zygote processes (one per core, up to 4, by default) serving up to `max_jobs`
    concurrent jobs in all. Several zygotes because each forks serially: on a busy machine one zygote's
    forks become the bottleneck. `forker=False` has each zygote fork its jobs itself, as it does anyway in
    the basic tier and on kernels without pidfds (Linux < 5.3). Thread-safe; `run_many` blocks."""

    def __init__(self, max_jobs: int | None = None, isolation: str = "auto", max_pids: int = 1024,
                 max_memory_bytes: int | None = None, zygotes: int | None = None, forker: bool = True) -> None:
        cores = os.cpu_count() or 1
        self.zygotes = max(1, zygotes or min(cores, 4))
        self.max_jobs = max(self.zygotes, max_jobs or 4 * cores)
        if -(-self.max_jobs // self.zygotes) > 64:
            raise ValueError("at most 64 jobs per zygote (the basic tier gives each slot its own uid)")
        ram = cgroup.physical_memory_bytes()
        # Default: half the machine's memory for the whole pool, so jobs can never starve the host.
        self.max_memory_bytes = max_memory_bytes or (ram // 2 if ram else None)
        self.isolation_wanted = isolation
        self.max_pids = max_pids
        self.forker = forker
        self._lock = threading.Lock()
        self._zygotes: list[_Zygote] = []
        self._ids = itertools.count(1)
        self._pid = -1
        self._cgroup: Path | None = None
        self._memory_cgroup: Path | None = None
        self.isolation: Isolation | None = None

    @property
    def cgroup_path(self) -> Path | None:
        """The pids cgroup that holds the zygotes and every job, where one could be made."""
        return self._cgroup

    @property
    def memory_cgroup_path(self) -> Path | None:
        return self._memory_cgroup

    @property
    def zygote_pids(self) -> list[int]:
        return [z.proc.pid for z in self._zygotes]

    @property
    def zygote_pid(self) -> int | None:
        return self._zygotes[0].proc.pid if self._zygotes else None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Isolation:
        with self._lock:
            return self._ensure_started()

    def _ensure_started(self) -> Isolation:
        if self._pid != os.getpid():  # a forked caller: the old pipes belong to the parent
            self._zygotes, self._pid = [], os.getpid()
        self._zygotes = [z for z in self._zygotes if z.alive()]
        if len(self._zygotes) == self.zygotes:
            assert self.isolation is not None
            return self.isolation
        if self._cgroup is None and self._memory_cgroup is None:
            name = f"llmft-sandbox-{os.getpid()}-{id(self):x}"
            self._cgroup = cgroup.make_pids_cgroup(name, self.max_pids)
            self._memory_cgroup = (cgroup.make_cgroup("memory", name, self.max_memory_bytes)
                                   if self.max_memory_bytes else None)
        config = {
            "max_jobs": -(-self.max_jobs // self.zygotes),
            "isolation": self.isolation_wanted,
            "forker": self.forker,
            "pids_cgroup": str(self._cgroup) if self._cgroup else None,
            "memory_cgroup": str(self._memory_cgroup) if self._memory_cgroup else None,
        }
        used = {z.index for z in self._zygotes}
        # Launch every missing zygote first, then wait for each: they start in parallel (each is a Python
        # start-up, about 50 ms, which a one-off `finetune score` would otherwise pay once per zygote).
        launched = [(index, *_Zygote.launch({**config, "index": index}))
                    for index in range(self.zygotes) if index not in used]
        try:
            for index, proc, stderr in launched:
                self._zygotes.append(_Zygote.handshake(proc, stderr, index))
        except BaseException:
            for _, proc, _stderr in launched:
                if proc.poll() is None and all(z.proc is not proc for z in self._zygotes):
                    proc.kill()
                    proc.wait()
            raise
        self.isolation = self._zygotes[0].isolation
        return self.isolation

    def close(self) -> None:
        with self._lock:
            zygotes, self._zygotes = self._zygotes, []
        if self._pid != os.getpid():
            return
        for z in zygotes:
            z.close()
        # A zygote's namespace may take a moment to empty after its outer process has exited.
        for path in (self._cgroup, self._memory_cgroup):
            deadline = time.monotonic() + 5
            while path is not None and not cgroup.remove(path) and time.monotonic() < deadline:
                time.sleep(0.02)
        self._cgroup = self._memory_cgroup = None

    # ------------------------------------------------------------------ jobs
    def submit(self, job: Mapping[str, object], limits: Limits) -> Future[JobResult]:
        return self.submit_many([job], limits)[0]

    def submit_many(self, jobs: Sequence[Mapping[str, object]], limits: Limits) -> list[Future[JobResult]]:
        """Queue jobs, spread over the zygotes by how much each already has pending; one write per zygote.

        A job is what `_job` runs: `{"mode": "tests", "solution": SOURCE, "tests": [PreparedTest.steps, ...]}` or
        `{"mode": "io", "solution": SOURCE, "inputs": [STDIN, ...]}`; this process only sends it (marshal) with its
        id and `limits`, and the parent judges the records that come back."""
        futures: list[Future[JobResult]] = []
        lim = limits.to_json()
        with self._lock:
            self._ensure_started()
            load = {id(z): len(z.pending) for z in self._zygotes}
            batches: dict[int, list[tuple[int, bytes, Future[JobResult]]]] = {id(z): [] for z in self._zygotes}
            for job in jobs:
                job_id = next(self._ids)
                zygote = min(self._zygotes, key=lambda z: load[id(z)])
                load[id(zygote)] += 1
                body = marshal.dumps({**job, "id": job_id, "limits": lim})
                fut: Future[JobResult] = Future()
                batches[id(zygote)].append((job_id, len(body).to_bytes(4, "big") + body, fut))
                futures.append(fut)
            for zygote in self._zygotes:
                if batches[id(zygote)]:
                    zygote.submit(batches[id(zygote)])
        return futures

    def run_many(self, jobs: Sequence[Mapping[str, object]], limits: Limits) -> list[JobResult]:
        return [f.result() for f in self.submit_many(jobs, limits)]


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
