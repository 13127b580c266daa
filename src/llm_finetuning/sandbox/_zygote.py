"""The sandbox zygote: a clean, pre-imported interpreter that supervises one isolated job per completion.

Started by `llm_finetuning.sandbox.pool` as its own interpreter (`python -I -c "import _zygote;
_zygote.main()" CONFIG_HEX`: imported, so its code comes from the cached bytecode rather than a compile
that would leave its garbage on the heap every job copies), never imported by the training process. It
uses the standard library only, so it can start before (and apart from) any torch/CUDA state.
Protocol: length-prefixed `marshal` frames both ways (only the trusted host and this process write
them: a job's own bytes travel inside as an opaque `bytes` value); jobs in on stdin, results out on
stdout, and the first frame out is the isolation report.

The sandbox's code is split by trust domain into three files of this folder, all loaded by the stub's
one import (this module imports the other two at module level, while the folder is on `sys.path`;
nothing is imported from the folder later): `_isolation` sets up the pool's walls once, before any job
exists; `_job` is what runs inside a job once it is started, beside the untrusted code; this module is
the supervisor, which runs no untrusted code (its warm-up runs the harness once on a job of its own):
it starts the jobs, kills each at its wall-clock deadline with SIGKILL, and relays what they send.

Every job is a fork of this process (or of its forker, see `Zygote`), and on a virtual machine a fork
costs mostly page-table and copy-on-write work, so the process that forks keeps its memory and its
per-job work small: binary frames instead of JSON and base64, epoll directly, and a warm-up job run
once before `gc.freeze()` so that lazily built interpreter state (the compiler's AST types among it) is
built here, not in every job.

Nothing a job sends is trusted here: records are relayed as capped bytes to the parent, which judges
them against expected values the job never sees.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import marshal
import os
import select
import signal
import sys
import time
import typing

# The other two files of the sandbox, imported here while the stub has this folder on sys.path.
from _isolation import (
    _ARCH,
    _DENIED,
    _MACHINE,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_NAME,
    PR_SET_PDEATHSIG,
    _clean_env,
    _enter_pool_namespaces,
    _interpreter_paths,
    _libc,
    _pivot_into_minimal_root,
    _seccomp_filter,
    _write_file,
)
from _job import _DEVNULL, _REBIND_IN_TMP, _children_of, _exit, _job_child, _len, _run_solution_then_tests

BASIC_UID_BASE = 65400  # basic tier as root: job slot k of zygote z runs as its own uid, 65400 + z * 64 + k

_SYSCALL = _libc.syscall
NR_PIDFD_SEND_SIGNAL, NR_PIDFD_OPEN = 424, 434  # the same number on every machine (Linux 5.1 and 5.3)
# clone(2) straight into a job's own user, mount and pid namespaces, like a fork (no new stack). The
# arguments are built once: a call through ctypes then allocates nothing, and every object a forking
# process touches between two forks is a page it copies.
_CLONE_JOB = (ctypes.c_long(_ARCH.get(_MACHINE, (0, 0, -1))[2]),
              ctypes.c_ulong(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | signal.SIGCHLD),
              *(ctypes.c_void_p(0),) * 4)


def _pidfd_open(pid: int) -> int:
    return _SYSCALL(ctypes.c_long(NR_PIDFD_OPEN), ctypes.c_long(pid), ctypes.c_long(0))


def _pidfd_works() -> bool:
    fd = _pidfd_open(os.getpid())
    if fd < 0:
        return False
    os.close(fd)
    return True


def _write_all(fd: int, data: bytes) -> None:
    """All of `data`: a write may come back short (a signal, a full pipe), or refused on a non-blocking fd."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [], 0.01)


def _default_signals() -> None:
    """What a job inherits: the default action for the signals the interpreter or the zygote handle."""
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
        signal.signal(s, signal.SIG_DFL)


def _read_exact(fd: int, n: int) -> bytes:
    data = os.read(fd, n)
    while 0 < _len(data) < n:
        more = os.read(fd, n - _len(data))
        if not more:
            break
        data += more
    return data


def _forker_loop(cmd: int, rep: int, slot_w: list[int]) -> typing.NoReturn:
    """The forker: read (slot, job) from the zygote, clone the job, reply (slot, pid), and nothing else."""
    syscall, args, read_exact, write, get_errno = _SYSCALL, _CLONE_JOB, _read_exact, os.write, ctypes.get_errno
    while True:
        head = read_exact(cmd, 8)
        if _len(head) < 8:
            _exit(0)  # the zygote closed the pipe: the pool is closing
        body = read_exact(cmd, int.from_bytes(head[4:], "big"))
        pid = syscall(*args)
        if pid == 0:
            try:
                _job_child(marshal.loads(body), slot_w[int.from_bytes(head[:4], "big")], "namespaces")
            except BaseException as exc:  # noqa: BLE001
                write(2, f"sandbox job setup failed: {exc!r}\n".encode())
            _exit(70)
        write(rep, head[:4] + (pid if pid > 0 else -get_errno()).to_bytes(4, "big", signed=True))


# ---------------------------------------------------------------- the zygote loop


class _Running(typing.TypedDict):
    """A job on its slot, from its start until its reply goes to the host (a plain dict at run time)."""

    job: dict  # the host's job frame, with its id and limits
    slot: int
    pid: int  # 0 until known (the forker names it)
    pidfd: int  # -1 when the zygote forked it itself
    fd: int  # the record pipe's read end
    workdir: str | None  # basic tier: the private temporary directory it runs in
    buf: bytearray  # its records so far
    cap: int  # record_bytes: past it, the job is killed and its records dropped
    deadline: float  # time.monotonic() at which it is killed
    exited: bool
    eof: bool
    overflow: bool
    timed_out: bool
    failed: bool  # it never started


class Zygote:
    """Serves jobs: frames in from the host, one forked job per frame, results out.

    In the namespaces tier (where pidfds exist) the jobs are forked by a forker process, which does nothing
    between two forks but read the next job: every fork write-protects all of the forking process's
    memory, and each page that process then writes costs a copy-on-write fault, so the bookkeeping here
    (records, deadlines, results) runs in a process that never forks. Otherwise the zygote forks them.
    Jobs are keyed by their slot (0 .. max_jobs - 1), one job per slot at a time.
    """

    def __init__(self, config: dict) -> None:
        self.tier = "none"
        self.config = config
        self.poll = select.epoll()
        self.fds: dict[int, int] = {}  # record pipe -> slot
        self.pidfds: dict[int, int] = {}  # pidfd of a job the forker started -> slot
        self.jobs: dict[int, _Running] = {}  # slot -> job state
        self.pid_slot: dict[int, int] = {}  # the zygote's own forks: pid -> slot
        self.queue: list[dict] = []
        self.max_jobs = int(config.get("max_jobs", 4))
        self.free_slots = list(range(self.max_jobs))
        # Distinct uids for every slot of every zygote of a pool (basic tier): no job can signal another.
        self.uid_base = BASIC_UID_BASE + 64 * int(config.get("index", 0))
        self.inbuf = bytearray()
        self.closing = False
        # The forker, when there is one: its pid, the pipe that carries jobs to it, the pipe of its
        # replies (slot, pid), and one record pipe per slot, reused by the slot's successive jobs.
        self.forker = 0
        self.cmd_w = self.rep_r = -1
        self.rep_buf = bytearray()
        self.slot_r: list[int] = []

    def report(self, facts: dict) -> None:
        self.out({"ready": True, "tier": self.tier, "facts": facts, "pid": os.getpid()})

    def out(self, obj: dict[str, object] | tuple[int, str, bytes]) -> None:
        """One frame to the host: a 4-byte big-endian length, then marshal data (a report, or a job's
        id, status and records)."""
        body = marshal.dumps(obj)
        _write_all(1, _len(body).to_bytes(4, "big") + body)

    # ------------------------------------------------------------ starting jobs

    def start_forker(self) -> None:
        """Fork the forker (namespaces tier). A job's processes cannot outlive its pid namespace, so a
        slot's record pipe has no writer left once the slot's job has exited: the next job may reuse it."""
        slot_w = []
        for _ in range(self.max_jobs):
            r, w = os.pipe()
            os.set_blocking(r, False)
            self.slot_r.append(r)
            slot_w.append(w)
        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                for fd in (cmd_w, rep_r, *self.slot_r):
                    os.close(fd)
                self.poll.close()
                for fd in (0, 1):  # the host's pipes: only the zygote holds them
                    os.dup2(_DEVNULL[0], fd)
                _libc.prctl(PR_SET_NAME, b"llmft-forker", 0, 0, 0)
                _default_signals()
                signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # jobs are reaped by the kernel
                _forker_loop(cmd_r, rep_w, slot_w)
            except BaseException as exc:  # noqa: BLE001
                os.write(2, f"sandbox forker failed: {exc!r}\n".encode())
            os._exit(0)
        for fd in (cmd_r, rep_w, *slot_w):
            os.close(fd)
        self.forker, self.cmd_w, self.rep_r = pid, cmd_w, rep_r
        os.set_blocking(rep_r, False)
        self.poll.register(rep_r, select.EPOLLIN)
        for slot, r in enumerate(self.slot_r):
            self.fds[r] = slot
            self.poll.register(r, select.EPOLLIN)

    def start_job(self, job: dict) -> None:
        slot = self.free_slots.pop()
        st: _Running = {
            "job": job, "slot": slot, "pid": 0, "pidfd": -1, "fd": -1, "workdir": None, "buf": bytearray(),
            "cap": int(job["limits"]["record_bytes"]), "deadline": time.monotonic() + float(job["limits"]["timeout_s"]),
            "exited": False, "eof": False, "overflow": False, "timed_out": False, "failed": False}
        self.jobs[slot] = st
        if self.forker:
            st["fd"] = self.slot_r[slot]
            body = marshal.dumps(job)
            _write_all(self.cmd_w, slot.to_bytes(4, "big") + _len(body).to_bytes(4, "big") + body)
            return
        r, w = os.pipe()
        if self.tier != "namespaces":
            import tempfile

            workdir = st["workdir"] = job["workdir"] = tempfile.mkdtemp(prefix="llmft-job-")
            job["uid"] = self.uid_base + slot
            if os.geteuid() == 0:
                os.chown(workdir, job["uid"], job["uid"])
        # Namespaces tier: one clone straight into the job's own user, pid and mount namespaces (the child
        # is pid 1 there); basic tier: a plain fork.
        try:
            pid = _SYSCALL(*_CLONE_JOB) if self.tier == "namespaces" else os.fork()
            err = ctypes.get_errno() if pid < 0 else 0
        except OSError as exc:  # os.fork raises where the raw clone returns -1
            pid, err = -1, exc.errno or errno.EAGAIN
        if pid == 0:
            try:
                os.close(r)
                signal.set_wakeup_fd(-1)
                _default_signals()
                _job_child(job, w, self.tier)
            except BaseException as exc:  # noqa: BLE001
                os.write(2, f"sandbox job setup failed: {exc!r}\n".encode())
            os._exit(70)
        os.close(w)
        if pid < 0:
            os.close(r)
            os.write(2, f"sandbox job start failed: {os.strerror(err)}\n".encode())
            st["exited"] = st["eof"] = st["failed"] = True
            self.finish_if_done(slot)
            return
        os.set_blocking(r, False)
        st["fd"], st["pid"] = r, pid
        self.pid_slot[pid] = slot
        self.fds[r] = slot
        self.poll.register(r, select.EPOLLIN)

    def on_forker_reply(self) -> None:
        """(slot, pid) pairs from the forker: watch each job through a pidfd (pid <= 0: the clone failed)."""
        try:
            data = os.read(self.rep_r, 4096)
        except BlockingIOError:
            return
        if not data:
            raise OSError(errno.EPIPE, "the sandbox forker is gone")
        self.rep_buf += data
        while _len(self.rep_buf) >= 8:
            slot = int.from_bytes(self.rep_buf[:4], "big")
            pid = int.from_bytes(self.rep_buf[4:8], "big", signed=True)
            del self.rep_buf[:8]
            st = self.jobs[slot]
            pidfd = _pidfd_open(pid) if pid > 0 else -1
            if pidfd < 0:  # never started, or already gone: what it wrote is in the slot's pipe
                if pid <= 0:
                    os.write(2, f"sandbox job start failed: {os.strerror(-pid)}\n".encode())
                    st["failed"] = True
                self.job_exited(slot)
                continue
            st["pid"], st["pidfd"] = pid, pidfd
            self.pidfds[pidfd] = slot
            self.poll.register(pidfd, select.EPOLLIN)
            if st["timed_out"] or st["overflow"]:
                self._kill(st)

    # ------------------------------------------------------------ running jobs

    def job_exited(self, slot: int) -> None:
        st = self.jobs[slot]
        st["exited"] = True
        if self.forker:
            if st["pidfd"] >= 0:
                self.poll.unregister(st["pidfd"])
                del self.pidfds[st["pidfd"]]
                os.close(st["pidfd"])
                st["pidfd"] = -1
            # Its whole pid namespace is gone: the slot's pipe holds the last of its records.
            self.on_readable(st["fd"])
            st["eof"] = True
        self.finish_if_done(slot)

    def finish_if_done(self, slot: int) -> None:
        st = self.jobs[slot]
        if not (st["exited"] and st["eof"]):
            return
        del self.jobs[slot]
        self.free_slots.append(slot)
        if st["workdir"]:
            import shutil

            shutil.rmtree(st["workdir"], ignore_errors=True)
            if os.geteuid() == 0:
                _remove_files_of(self.uid_base + slot)
        status = ("error" if st["failed"] else "timeout" if st["timed_out"] else "overflow" if st["overflow"]
                  else "ok")
        self.out((st["job"]["id"], status, bytes(st["buf"])))

    def on_readable(self, fd: int) -> None:
        slot = self.fds[fd]
        st = self.jobs.get(slot)
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return
            if not data:
                if self.forker:  # the forker holds every slot's pipe open as long as it lives
                    raise OSError(errno.EPIPE, "the sandbox forker is gone")
                self.poll.unregister(fd)
                del self.fds[fd]
                os.close(fd)
                if st is not None:
                    st["eof"] = True
                    self.finish_if_done(slot)
                return
            if st is None or st["overflow"]:
                continue  # no job on the slot (nothing can write then), or one already over its cap
            if _len(st["buf"]) + _len(data) > st["cap"]:
                st["overflow"] = True
                st["buf"].clear()
                self._kill(st)
            else:
                st["buf"] += data

    def _kill(self, st: _Running) -> None:
        if st["pidfd"] >= 0:
            _SYSCALL(ctypes.c_long(NR_PIDFD_SEND_SIGNAL), ctypes.c_long(st["pidfd"]),
                     ctypes.c_long(signal.SIGKILL), ctypes.c_void_p(0), ctypes.c_long(0))
            return
        if self.forker or not st["pid"] or st["exited"]:
            return  # the forker has not named it yet: killed as soon as it does
        with contextlib.suppress(OSError):
            os.kill(st["pid"], signal.SIGKILL)
        if self.tier != "namespaces":
            with contextlib.suppress(OSError):
                os.killpg(st["pid"], signal.SIGKILL)

    def reap(self) -> None:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.forker:
                raise OSError(errno.ECHILD, "the sandbox forker exited")
            slot = self.pid_slot.pop(pid, None)
            if slot is not None:
                if self.tier != "namespaces":
                    with contextlib.suppress(OSError):
                        os.killpg(pid, signal.SIGKILL)
                    if os.geteuid() == 0:
                        _kill_uid(self.uid_base + slot)
                self.job_exited(slot)

    def on_stdin(self) -> None:
        try:
            data = os.read(0, 1 << 20)
        except BlockingIOError:
            return
        if not data:
            self.closing = True
            self.poll.unregister(0)
            return
        buf = self.inbuf
        buf += data
        i = 0
        while _len(buf) - i >= 4:
            n = int.from_bytes(buf[i:i + 4], "big")
            if _len(buf) - i - 4 < n:
                break
            self.queue.append(marshal.loads(buf[i + 4:i + 4 + n]))
            i += 4 + n
        del buf[:i]

    def serve(self) -> None:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        os.set_blocking(0, False)
        self.poll.register(0, select.EPOLLIN)
        self.poll.register(wake_r, select.EPOLLIN)
        while not (self.closing and not self.jobs and not self.queue):
            if self.closing:
                self.queue.clear()
                for st in self.jobs.values():
                    self._kill(st)
            while self.queue and _len(self.jobs) < self.max_jobs:
                self.start_job(self.queue.pop(0))
            now = time.monotonic()
            timeout = 0.5
            for st in self.jobs.values():
                if not st["exited"] and now >= st["deadline"]:
                    st["timed_out"] = True
                    self._kill(st)
                else:
                    timeout = min(timeout, max(0.0, st["deadline"] - now))
            try:
                events = self.poll.poll(timeout)
            except InterruptedError:
                events = []
            for fd, _ in events:
                if fd == 0:
                    self.on_stdin()
                elif fd == wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 4096)
                elif fd == self.rep_r:
                    self.on_forker_reply()
                elif fd in self.pidfds:
                    self.job_exited(self.pidfds[fd])
                elif fd in self.fds:
                    self.on_readable(fd)
            self.reap()
            if self.tier != "namespaces":
                _kill_orphans(set(self.pid_slot))


def _kill_uid(uid: int) -> None:
    """Basic tier as root: SIGKILL every process of a job's own uid until none is left."""
    for _ in range(1000):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.stat(f"/proc/{entry}").st_uid != uid:
                    continue
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    stat = fh.read()
                if stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] in (b"Z", b"X"):
                    continue  # dead already; reaped by whoever is its parent
                os.kill(int(entry), signal.SIGKILL)
                found = True
            except OSError:
                continue
        if not found:
            return
        time.sleep(0.001)


def _remove_files_of(uid: int) -> None:
    """Basic tier as root: what a job (uid 65534) left in the world-writable directories is removed."""
    for base in ("/tmp", "/var/tmp", "/dev/shm"):
        try:
            entries = os.listdir(base)
        except OSError:
            continue
        for name in entries:
            path = os.path.join(base, name)
            try:
                if os.lstat(path).st_uid != uid:
                    continue
                if os.path.isdir(path) and not os.path.islink(path):
                    import shutil

                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
            except OSError:
                pass


def _kill_orphans(live: set[int]) -> None:
    """Basic tier: descendants reparented to the zygote (a subreaper) after their job ended are killed."""
    for pid in _children_of(os.getpid(), live):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


_WARM_UP_JOB = {
    "mode": "tests",
    "solution": "def f(x):\n    return [x, x * 0.5, str(x), (x,), {x: b'x'}, None, x > 0]\n",
    "tests": [[["probe", ["f(2)", "f(-1)[0]", "g(1)"]]], [["exec", "y = f(3)"], ["probe", ["y[2]"]]]],
}


def _warm_up() -> None:
    """Run one job's code path here, once, so what the interpreter builds lazily on first use (the
    compiler's AST types, method caches, interned names) is built before the fork, not in every job."""
    for _ in range(2):
        _run_solution_then_tests(_WARM_UP_JOB, _DEVNULL[0])


def main() -> None:
    config = marshal.loads(bytes.fromhex(sys.argv[1]))
    facts: dict = {"kernel": os.uname().release, "machine": _MACHINE}
    for kind in ("pids_cgroup", "memory_cgroup"):
        facts[kind] = None
        if config.get(kind):
            try:
                _write_file(os.path.join(config[kind], "cgroup.procs"), str(os.getpid()))
                facts[kind] = config[kind]
            except OSError as exc:
                facts[f"{kind}_error"] = str(exc)
    if os.geteuid() == 0:
        # The zygote is the last process the OOM killer should pick; its jobs (set to 1000) the first.
        with contextlib.suppress(OSError):
            _write_file("/proc/self/oom_score_adj", "-1000")
    _libc.prctl(PR_SET_NAME, b"llmft-zygote", 0, 0, 0)  # what ps and perf show
    zygote = Zygote(config)
    want = config.get("isolation", "auto")
    if want in ("auto", "namespaces"):
        try:
            wanted = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", *_interpreter_paths(),
                      *config.get("extra_ro", [])]
            sources, ns_facts = _enter_pool_namespaces(sorted({os.path.normpath(p) for p in wanted}))
            facts.update(ns_facts)
            child = os.fork()
            if child:
                # Outside the new pid namespace: wait for the zygote (pid 1 inside) and pass its status on.
                for s in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(s, signal.SIG_IGN)
                _, status = os.waitpid(child, 0)
                os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            facts["bound_read_only"] = _pivot_into_minimal_root(sources)
            # Each job mounts its own /tmp over the pool's: what the pool bound under /tmp, it binds again.
            _REBIND_IN_TMP[:] = [p for p in facts["bound_read_only"] if p.startswith("/tmp/")]
            facts["bound_again_in_each_job"] = list(_REBIND_IN_TMP)
            facts["pivot_root"] = True
            zygote.tier = "namespaces"
        except OSError as exc:
            if want == "namespaces" or os.getpid() == 1:
                zygote.out({"ready": False, "error": f"namespaces unavailable: {exc}"})
                os._exit(2)
            facts["namespaces_error"] = str(exc)
    if zygote.tier == "none":
        _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        zygote.tier = "basic"
        facts.update({"user_ns": False, "net_ns": False, "pid_ns": False, "mount_ns": False,
                      "runs_as_uid": (f"{zygote.uid_base}+slot" if os.geteuid() == 0 else os.geteuid())})
    try:
        # Installed here, once: every job inherits it (with no_new_privs), and the zygote, which needs
        # none of these calls either, is held by it too.
        _seccomp_filter()
    except OSError as exc:
        zygote.out({"ready": False, "error": f"seccomp unavailable: {exc}"})
        os._exit(2)
    facts["seccomp_denied"] = list(_DENIED)
    facts["rlimits"] = ["CPU", "AS", "FSIZE", "NOFILE", "NPROC", "CORE", "STACK"]
    facts["capabilities"] = ("all dropped; securebits NOROOT|NO_SETUID_FIXUP|NO_CAP_AMBIENT_RAISE locked"
                             if zygote.tier == "namespaces" else "none held (a uid of its own per slot)")
    os.environ.clear()
    os.environ.update(_clean_env("/tmp"))
    _DEVNULL[0] = os.open("/dev/null", os.O_RDWR)
    _warm_up()
    gc.collect()
    _libc.malloc_trim(0)  # free heap pages go back to the kernel: every fork then copies fewer page-table entries
    gc.freeze()  # forked jobs then never walk (and so never copy) the zygote's own objects
    if zygote.tier == "namespaces" and config.get("forker", True) and _pidfd_works():
        zygote.start_forker()
    facts["forker"] = zygote.forker > 0
    zygote.report(facts)
    zygote.serve()


if __name__ == "__main__":
    main()
