"""The sandbox's pool isolation: what the zygote sets up once, before any job exists.

Loaded with `_zygote` by the pool's stub (`python -I -c "import _zygote; ..."`, the sandbox folder on
`sys.path` only while that import runs), never imported by the training process; standard library only.
Trusted code that runs before any untrusted code: the system-call wrappers (`ctypes`), the pool's
namespaces ("namespaces" tier): user + network + mount + pid + ipc + uts; as host root the namespace's
root is mapped to an unprivileged host uid (65534), so RLIMIT_NPROC applies; a pivot_root into a
read-only tree that holds only the interpreter and system libraries (no home, no /etc, no /work, no
sockets), every mount private. And the seccomp filter (no socket(), io_uring, ptrace, process_vm_*,
System V IPC objects or kernel keyrings: nothing a job could leave behind for a later job), installed
once in the zygote with no_new_privs and inherited by every job.

The walls each job raises for itself are in `_job`; the supervisor that starts and kills jobs, in `_zygote`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NAME, PR_SET_SECCOMP, PR_CAPBSET_DROP = 1, 4, 15, 22, 24
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 36, 38, 47
NOBODY = 65534

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


def _interpreter_paths() -> list[str]:
    """Where this interpreter's own files live: its prefixes, the stdlib and site-packages, each also
    through its symlinks' targets (a venv under /tmp, a stdlib linked elsewhere). Not the folders .pth
    files add: those are projects, not the interpreter."""
    import site
    import sys
    import sysconfig

    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)), *site.getsitepackages()]
    for scheme_vars in ({}, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}):
        found = sysconfig.get_paths(vars=scheme_vars)
        paths += [found[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in found]
    return sorted({os.path.normpath(q) for p in paths if p for q in (p, os.path.realpath(p))})


def _open_sources(paths: list[str]) -> dict[str, int]:
    """O_PATH handles on the trees to bind, opened while we can still reach them (e.g. under /root).
    Never / or /tmp itself; a tree under /tmp is bound like any other (and again into each job's /tmp)."""
    handles: dict[str, int] = {}
    for path in paths:
        path = os.path.normpath(path)
        if path in ("/", "/tmp") or path in handles or not os.path.lexists(path):
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


# ---------------------------------------------------------------- the seccomp filter


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


def _clean_env(home: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}
