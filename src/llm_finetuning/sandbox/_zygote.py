"""The sandbox zygote: a clean, pre-imported interpreter that forks one isolated job per completion.

Started by `llm_finetuning.sandbox.pool` as its own interpreter (`python -I -c "import _zygote;
_zygote.main()" CONFIG_HEX`: imported, so its code comes from the cached bytecode rather than a compile
that would leave its garbage on the heap every job copies), never imported by the training process. It
uses the standard library only, so it can start before (and apart from) any torch/CUDA state.
Protocol: length-prefixed `marshal` frames both ways (only the trusted host and this process write
them: a job's own bytes travel inside as an opaque `bytes` value); jobs in on stdin, results out on
stdout, and the first frame out is the isolation report.

Every job is a fork of this process (or of its forker, see `Zygote`), and on a virtual machine a fork
costs mostly page-table and copy-on-write work, so the process that forks keeps its memory and its
per-job work small: binary frames instead of JSON and base64, epoll directly, and a warm-up job run
once before `gc.freeze()` so that lazily built interpreter state (the compiler's AST types among it) is
built here, not in every job.

Isolation, set up once for the pool ("namespaces" tier, where user namespaces work):
  user + network + mount + pid + ipc + uts namespaces; as host root the namespace's root is mapped to an
  unprivileged host uid (65534), so RLIMIT_NPROC applies; a pivot_root into a read-only tree that holds
  only the interpreter and system libraries (no home, no /etc, no /work, no sockets).
Then per job: a nested user + mount + pid namespace (the job's processes all die with it), a fresh /proc
and a size-capped tmpfs /tmp as the private working directory, every capability dropped, no_new_privs,
a seccomp filter (no socket(), io_uring, ptrace, process_vm_*, System V IPC objects or kernel keyrings:
nothing a job could leave behind for a later job), rlimits (CPU, address space, file
size, open files, processes, no core files), and a wall-clock deadline enforced here with SIGKILL.
Without user namespaces ("basic" tier) the job runs as uid 65534 when started as root, in its own
session and process group with a child subreaper that kills every leftover descendant, in a private
temporary directory removed afterwards, with the same seccomp filter and rlimits.

Nothing a job sends is trusted here: records are relayed as capped bytes to the parent, which judges
them against expected values the job never sees.
"""

from __future__ import annotations

import _ast  # noqa: F401 - keeps the compiler's AST types alive: without it 3.11 rebuilds them per compile()
import _json
import binascii

# Pre-import what solutions commonly import, so each forked job finds it loaded.
import bisect  # noqa: F401
import builtins
import collections  # noqa: F401
import contextlib
import copy  # noqa: F401
import ctypes
import dataclasses  # noqa: F401
import decimal  # noqa: F401
import errno
import fractions  # noqa: F401
import functools  # noqa: F401
import gc
import heapq  # noqa: F401
import itertools  # noqa: F401
import json  # noqa: F401
import marshal
import math  # noqa: F401
import operator  # noqa: F401
import os
import random  # noqa: F401
import re  # noqa: F401
import resource
import select
import signal
import statistics  # noqa: F401
import string  # noqa: F401
import struct
import sys
import time
import typing  # noqa: F401

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NAME, PR_SET_SECCOMP, PR_CAPBSET_DROP = 1, 4, 15, 22, 24
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 36, 38, 47
NOBODY = 65534
BASIC_UID_BASE = 65400  # basic tier as root: job slot k of zygote z runs as its own uid, 65400 + z * 64 + k
MAX_RECORD_BYTES = 1 << 20

# (audit arch, pivot_root, clone) per machine
_ARCH = {"x86_64": (0xC000003E, 155, 56), "aarch64": (0xC00000B7, 41, 220)}
# Syscalls the seccomp filter denies, with their numbers on each machine of _DENIED_COLUMNS.
_DENIED_COLUMNS = ("x86_64", "aarch64")
_DENIED = {
    "socket": (41, 198), "io_uring_setup": (425, 425), "ptrace": (101, 117),
    "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "shmget": (29, 194), "semget": (64, 190), "msgget": (68, 186),
    "add_key": (248, 217), "request_key": (249, 218), "keyctl": (250, 219),
}
_MACHINE = os.uname().machine

_libc = ctypes.CDLL(None, use_errno=True)

# Captured before any solution runs, so a solution that patches builtins does not change the harness.
_type, _len, _isinstance, _repr = builtins.type, builtins.len, builtins.isinstance, builtins.repr
_float_repr, _int_str = float.__repr__, int.__repr__
_BaseException, _exec, _eval, _compile = BaseException, builtins.exec, builtins.eval, builtins.compile
_write, _exit = os.write, os._exit
_esc, _b64 = _json.encode_basestring_ascii, binascii.b2a_base64  # a JSON string literal; base64


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            src.encode() if src else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


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


def _write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


# ---------------------------------------------------------------- isolation of the whole pool


def _map_ids_self(uid: int, gid: int) -> None:
    _write_file("/proc/self/setgroups", "deny")
    _write_file("/proc/self/uid_map", f"0 {uid} 1")
    _write_file("/proc/self/gid_map", f"0 {gid} 1")


def _open_sources(paths: list[str]) -> dict[str, int]:
    """O_PATH handles on the trees to bind, opened while we can still reach them (e.g. under /root)."""
    handles: dict[str, int] = {}
    for path in paths:
        path = os.path.normpath(path)
        if path in ("/", "/tmp") or path.startswith("/tmp/") or path in handles or not os.path.lexists(path):
            continue
        if os.path.islink(path) and os.path.dirname(path) == "/":
            handles[path] = -1
            continue
        try:
            handles[path] = os.open(path, os.O_PATH | os.O_DIRECTORY)
        except OSError:
            continue
    return handles


def _enter_pool_namespaces(wanted: list[str]) -> tuple[dict, dict[str, int]]:
    """unshare user/net/mount/pid/ipc/uts; as host root map ns-root to uid 65534. Returns facts."""
    # Only root of the initial user namespace may map another uid; root inside a container's user
    # namespace (rootless Docker/Podman) maps itself, like any unprivileged user.
    try:
        with open("/proc/self/uid_map") as fh:
            initial_ns = fh.read().split() == ["0", "0", "4294967295"]
    except OSError:
        initial_ns = False
    host_root = os.geteuid() == 0 and initial_ns
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    if host_root:
        # A helper left in the host namespace writes the maps (mapping another uid needs CAP_SETUID there).
        go_r, go_w = os.pipe()
        me = os.getpid()
        helper = os.fork()
        if helper == 0:
            try:
                os.close(go_w)
                if os.read(go_r, 1) != b"1":
                    os._exit(3)
                _write_file(f"/proc/{me}/uid_map", f"0 {NOBODY} 1")
                _write_file(f"/proc/{me}/gid_map", f"0 {NOBODY} 1")
                os._exit(0)
            except BaseException:
                os._exit(4)
        os.close(go_r)
        try:
            _check(_libc.unshare(flags), "unshare")
        except OSError:
            os.write(go_w, b"0")
            os.waitpid(helper, 0)
            raise
        os.write(go_w, b"1")
        os.close(go_w)
        _, status = os.waitpid(helper, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise OSError(errno.EPERM, "could not write the uid/gid maps")
        # Still host uid 0 on the filesystem: open what we will bind (e.g. under /root) in the new mount ns.
        sources = _open_sources(wanted)
        os.setgroups([])
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
        # The uid change made us non-dumpable, which would hide /proc/self/{uid_map,...} from the jobs.
        _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        host_uid = NOBODY
    else:
        uid, gid = os.geteuid(), os.getegid()
        _check(_libc.unshare(flags), "unshare")
        _map_ids_self(uid, gid)
        host_uid = uid
        sources = _open_sources(wanted)
    return sources, {"user_ns": True, "net_ns": True, "mount_ns": True, "pid_ns": True, "ipc_ns": True,
            "uts_ns": True, "host_uid": host_uid}


def _bind_ro(src: str, dst: str) -> None:
    _mount(src, dst, None, MS_BIND | MS_REC)
    st = os.statvfs(src)
    keep = 0
    for st_flag, ms_flag in ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME),
                             (2048, MS_NODIRATIME), (4096, MS_RELATIME)):
        if st.f_flag & st_flag:
            keep |= ms_flag
    _mount(None, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY | keep)


def _pivot_into_minimal_root(sources: dict[str, int]) -> list[str]:
    """Build a read-only root holding only system and interpreter files; return what was bound."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # The new root is a tmpfs over /tmp in this (private) mount namespace: nothing is left on the host.
    new = "/tmp"
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    bound: list[str] = []
    for path, fd in sources.items():
        target = new + path
        if fd < 0:
            os.symlink(os.readlink(path), target)
            continue
        if any(path.startswith(b + "/") for b in bound):
            os.close(fd)
            continue
        os.makedirs(target, exist_ok=True)
        _bind_ro(f"/proc/self/fd/{fd}", target)
        os.close(fd)
        bound.append(path)
    for d in ("dev", "proc", "tmp", "etc", "old"):
        os.makedirs(f"{new}/{d}", exist_ok=True)
    with open(f"{new}/etc/passwd", "w") as fh:
        fh.write("root:x:0:0:sandbox:/tmp:/bin/false\n")
    with open(f"{new}/etc/group", "w") as fh:
        fh.write("root:x:0:\n")
    _mount("tmpfs", f"{new}/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
    for node in ("null", "zero", "full", "random", "urandom"):
        open(f"{new}/dev/{node}", "w").close()
        _mount(f"/dev/{node}", f"{new}/dev/{node}", None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{new}/dev/{name}")
    _mount(None, f"{new}/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    _mount("proc", f"{new}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    arch = _ARCH[_MACHINE]
    _check(_libc.syscall(arch[1], new.encode(), f"{new}/old".encode()), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/old", MNT_DETACH), "umount old root")
    os.rmdir("/old")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _assert_private_mounts()
    return bound


def _assert_private_mounts() -> None:
    """No mount of the pool's namespace may be shared or a slave: a job's mounts then stay its own."""
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split(" - ")[0].split()[6:]  # the optional fields
            if any(f.startswith(("shared:", "master:")) for f in fields):
                raise OSError(errno.EPERM, f"a sandbox mount propagates: {line.strip()}")


# ---------------------------------------------------------------- per-job walls


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_SECCOMP: list = []  # [program buffer, sock_fprog], built once in the zygote


def _seccomp_filter() -> None:
    """Deny socket(), io_uring_setup, ptrace, process_vm_*, SysV IPC and keyrings (EACCES), and foreign
    syscall ABIs."""
    if not _SECCOMP:
        _build_seccomp()
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.prctl(PR_SET_SECCOMP, 2, ctypes.byref(_SECCOMP[1]), 0, 0), "seccomp")


def _build_seccomp() -> None:
    arch = _ARCH.get(_MACHINE)
    if arch is None:
        raise OSError(errno.ENOSYS, f"no seccomp table for {_MACHINE}")
    audit = arch[0]
    denied = [nrs[_DENIED_COLUMNS.index(_MACHINE)] for nrs in _DENIED.values()]
    allow, eacces, enosys = 0x7FFF0000, 0x00050000 | errno.EACCES, 0x00050000 | errno.ENOSYS
    prog: list[tuple[int, int, int, int]] = [(0x20, 0, 0, 4), (0x15, 1, 0, audit), (0x06, 0, 0, enosys),
                                             (0x20, 0, 0, 0)]
    n = len(denied)
    prog.append((0x35, n + 1, 0, 0x40000000))  # x32 syscalls -> deny
    for i, nr in enumerate(denied):
        prog.append((0x15, n - i, 0, nr))
    prog.append((0x06, 0, 0, allow))
    prog.append((0x06, 0, 0, eacces))
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw)
    _SECCOMP[:] = [buf, _SockFprog(len(prog), ctypes.addressof(buf))]


# NOROOT, NO_SETUID_FIXUP and NO_CAP_AMBIENT_RAISE, each locked, and KEEP_CAPS locked off: an execve
# (a shell-out) as the namespace's root gains no capability back.
_SECUREBITS = 0b11101111
PR_SET_SECUREBITS = 28


def _drop_capabilities() -> None:
    _check(_libc.prctl(PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0), "securebits")
    _libc.prctl(PR_CAP_AMBIENT, 4, 0, 0, 0)
    _check(_libc.capset(_CAP_HEADER, _CAP_DATA), "capset")


_CAP_HEADER = (ctypes.c_uint32 * 2)(0x20080522, 0)
_CAP_DATA = (ctypes.c_uint32 * 6)()


def _set_rlimits(limits: dict) -> None:
    mem = int(limits["memory_mb"]) << 20
    cpu = int(limits["cpu_s"])
    for res, val in (
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (mem, mem)),
        (resource.RLIMIT_FSIZE, (int(limits["file_mb"]) << 20,) * 2),
        (resource.RLIMIT_NOFILE, (int(limits["nofile"]),) * 2),
        (resource.RLIMIT_NPROC, (int(limits["nproc"]),) * 2),
        (resource.RLIMIT_CORE, (0, 0)),
        (resource.RLIMIT_STACK, (min(64 << 20, mem),) * 2),
    ):
        resource.setrlimit(res, val)


def _close_fds_except(keep: set[int]) -> None:
    low = 3
    for fd in sorted(keep):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 65536)


def _children_of(parent: int, skip: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Pids whose parent is `parent`, read from /proc (a subreaper's orphans included)."""
    me, kids = str(parent), list[int]()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return kids
    for entry in entries:
        if not entry.isdigit() or int(entry) in skip:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        if stat[stat.rfind(")") + 2:].split()[1] == me:
            kids.append(int(entry))
    return kids


def _kill_descendants() -> None:
    """Basic tier: as child subreaper, kill every process reparented to us until none is left."""
    for _ in range(200):
        kids = _children_of(os.getpid())
        if not kids:
            return
        for pid in kids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in kids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


# ---------------------------------------------------------------- what runs inside a job


def _send(fd: int, text: str) -> None:
    """One record: a JSON array as text, length-prefixed (the parent decodes it strictly)."""
    data = text.encode()
    if _len(data) > MAX_RECORD_BYTES:
        data = b'["big"]'
    _write(fd, _len(data).to_bytes(4, "big") + data)


_SEQ_TAGS: dict[type, str] = {list: '{"l":[', tuple: '{"t":[', set: '{"s":[', frozenset: '{"fs":['}


def _enc(v: typing.Any, depth: int = 0) -> str:
    """Plain data only (exact builtin types) as tagged JSON text; anything else raises, and the test
    fails. Written without the json module, with references captured before any solution ran."""
    if depth > 50:
        raise ValueError("too deep")
    t = _type(v)
    if t is str:
        return _esc(v)
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if t is int:
        return '{"i":"' + _int_str(v) + '"}'
    if t is float:
        return '{"f":"' + _float_repr(v) + '"}'
    if t is complex:
        return '{"c":["' + _float_repr(v.real) + '","' + _float_repr(v.imag) + '"]}'
    if t is bytes:
        return '{"b":"' + _b64(v, newline=False).decode() + '"}'
    if t is list or t is tuple or t is set or t is frozenset:
        return _SEQ_TAGS[t] + ",".join([_enc(x, depth + 1) for x in v]) + "]}"
    if t is dict:
        return '{"d":[' + ",".join(["[" + _enc(k, depth + 1) + "," + _enc(x, depth + 1) + "]"
                                    for k, x in dict.items(v)]) + "]}"
    raise TypeError(f"not plain data: {t.__name__}")


def _plain(v: typing.Any, depth: int = 0) -> bool:
    t = _type(v)
    if v is None or t in (bool, str, int, float, complex, bytes):
        return True
    if depth > 50:
        return False
    if t in (list, tuple, set, frozenset):
        return all(_plain(x, depth + 1) for x in v)
    if t is dict:
        return all(_plain(k, depth + 1) and _plain(x, depth + 1) for k, x in dict.items(v))
    return False


def _lf_cmp(op: str, a: object, b: object) -> bool:
    """A comparison that refuses anything but plain data (always-equal objects, int subclasses)."""
    if not (_plain(a) and _plain(b)):
        raise AssertionError("comparison of values that are not plain data")
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b  # type: ignore[operator]
    if op == "<=":
        return a <= b  # type: ignore[operator]
    if op == ">":
        return a > b  # type: ignore[operator]
    if op == ">=":
        return a >= b  # type: ignore[operator]
    if op == "in":
        return a in b  # type: ignore[operator]
    if op == "not in":
        return a not in b  # type: ignore[operator]
    if op == "is":
        return a is b
    if op == "is not":
        return a is not b
    raise AssertionError(f"unknown comparison {op}")


def _lf_truth(v: object) -> bool:
    if _type(v) is bool:
        return v is True
    if not _plain(v):
        raise AssertionError("truth value of something that is not plain data")
    return bool(v)


def _run_solution_then_tests(job: dict, rfd: int) -> None:
    """The solution runs first, then each test; probe values and markers go to the record pipe."""
    g: dict = {"__name__": "__main__", "__builtins__": builtins}
    try:
        _exec(_compile(job["solution"], "<solution>", "exec"), g)
    except _BaseException as exc:  # noqa: BLE001 - a solution may raise anything, SystemExit included
        _send(rfd, '["s",' + _esc(_type(exc).__name__) + "]")
    for ti, steps in enumerate(job["tests"]):
        g["__lf_cmp"], g["__lf_truth"] = _lf_cmp, _lf_truth
        failed = False
        for si, step in enumerate(steps):
            if step[0] == "exec":
                try:
                    _exec(_compile(step[1], f"<test {ti}>", "exec"), g)
                except _BaseException as exc:  # noqa: BLE001
                    _send(rfd, f'["x",{ti},{si},' + _esc(_type(exc).__name__) + "]")
                    failed = True
                    break
            else:
                out = []
                for src in step[1]:
                    try:
                        out.append('["ok",' + _enc(_eval(_compile(src, f"<test {ti}>", "eval"), g)) + "]")
                    except _BaseException as exc:  # noqa: BLE001
                        out.append('["err",' + _esc(_type(exc).__name__) + "]")
                _send(rfd, f'["v",{ti},{si},[' + ",".join(out) + "]]")
        if not failed:
            _send(rfd, f'["d",{ti}]')


def _run_io_cases(job: dict, rfd: int, devnull: int) -> None:
    """Each stdin case runs the solution in a fresh child; its stdout (capped) goes to the parent."""
    cap = int(job["limits"]["output_bytes"])
    for ci, stdin_text in enumerate(job["inputs"]):
        path = f"in{ci}.txt"
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(stdin_text)
        out_r, out_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.setpgid(0, 0)
                fd = os.open(path, os.O_RDONLY)
                os.dup2(fd, 0)
                os.dup2(out_w, 1)
                os.dup2(devnull, 2)
                _close_fds_except(set())
                sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
                sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
                sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
                g = {"__name__": "__main__", "__builtins__": builtins}
                with contextlib.suppress(SystemExit):
                    _exec(_compile(job["solution"], "<solution>", "exec"), g)
                sys.stdout.flush()
                _exit(0)
            except _BaseException:  # noqa: BLE001
                with contextlib.suppress(_BaseException):
                    sys.stdout.flush()
                _exit(1)
        os.close(out_w)
        chunks: list[bytes] = []
        total, truncated, status = 0, False, None
        os.set_blocking(out_r, False)
        while True:
            try:
                data = os.read(out_r, 65536)
            except BlockingIOError:
                data = None
            if data:
                total += len(data)
                if total > cap:
                    truncated = True
                    break
                chunks.append(data)
                continue
            if data == b"":
                break
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                try:
                    while True:
                        more = os.read(out_r, 65536)
                        if not more:
                            break
                        total += len(more)
                        if total > cap:
                            truncated = True
                            break
                        chunks.append(more)
                except BlockingIOError:
                    pass
                break
            time.sleep(0.001)
        os.close(out_r)
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        if status is None:
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:
                status = 0
        code = os.waitstatus_to_exitcode(status) if status is not None else -1
        text = b"".join(chunks).decode("utf-8", errors="replace")
        _send(rfd, f'["o",{ci},' + _esc(text) + "," + ("true" if truncated else "false") + f",{code}]")
        os.unlink(path)


_DEVNULL = [-1]  # opened once in the zygote


def _clean_env(home: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}


def _job_body(job: dict, rfd: int, tier: str) -> None:
    """Runs in the job's first process (pid 1 of the job's pid namespace in the namespaces tier)."""
    limits = job["limits"]
    if tier == "namespaces":
        # Every mount of the pool is private (checked once, _assert_private_mounts): these two never
        # propagate out of the job's own mount namespace.
        _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={int(limits['disk_mb'])}m,nr_inodes=4096,mode=1777")
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        workdir = "/tmp"  # HOME, TMPDIR and the rest of the environment were set once in the zygote
        _drop_capabilities()
    else:
        workdir = job["workdir"]
        _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        if os.geteuid() == 0:
            uid = int(job["uid"])
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
    os.chdir(workdir)
    if tier != "namespaces":
        os.environ.clear()
        os.environ.update(_clean_env(workdir))
    devnull = _DEVNULL[0]
    # The zygote's stdin/stdout are its channel to the parent: no job process keeps them.
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    with contextlib.suppress(OSError):  # out of memory, the kernel kills jobs before anything else
        _write_file("/proc/self/oom_score_adj", "1000")
    # Non-dumpable: no other process of the job may open our /proc/<pid>/mem (inherited by forks).
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    _set_rlimits(limits)  # the seccomp filter is the zygote's own, inherited by every job
    _close_fds_except({rfd, devnull})
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if job["mode"] == "io":
        _run_io_cases(job, rfd, devnull)
    else:
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        _run_solution_then_tests(job, rfd)
    if tier != "namespaces":
        _kill_descendants()


def _job_child(job: dict, w: int, tier: str) -> typing.NoReturn:
    """A job's first process, just forked (by the zygote or the forker): never returns."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    _libc.prctl(PR_SET_NAME, b"llmft-job", 0, 0, 0)
    if tier == "namespaces":
        # Its new user namespace maps only its root, to ours: the one mapping a process may write for
        # itself (with setgroups denied), so no parent has to write it and signal the child to go on.
        _map_ids_self(0, 0)
    _job_body(job, w, tier)
    _exit(0)


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
        self.jobs: dict[int, dict] = {}  # slot -> job state
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

    def out(self, obj: typing.Any) -> None:
        """One frame to the host: a 4-byte big-endian length, then marshal data."""
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
        st: dict[str, typing.Any] = {
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

            st["workdir"] = job["workdir"] = tempfile.mkdtemp(prefix="llmft-job-")
            job["uid"] = self.uid_base + slot
            if os.geteuid() == 0:
                os.chown(st["workdir"], job["uid"], job["uid"])
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

    def _kill(self, st: dict) -> None:
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
            wanted = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", sys.base_prefix,
                      sys.prefix, sys.exec_prefix, *config.get("extra_ro", [])]
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
