"""The pool reports its isolation, survives losing its zygote, and keeps ML libraries out."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llm_finetuning.sandbox import Limits, SandboxPool


@pytest.mark.skipif(platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"),
                    reason="the sandbox isolates on Linux x86_64/aarch64 only")
def test_isolation_reports_itself_active(ns_pool: SandboxPool) -> None:
    iso = ns_pool.isolation
    assert iso is not None and iso.active and iso.tier == "namespaces"
    for fact in ("user_ns", "net_ns", "mount_ns", "pid_ns", "pivot_root"):
        assert iso.facts[fact] is True, fact
    assert "socket" in iso.facts["seccomp_denied"]


def test_a_dead_zygote_fails_pending_jobs_and_is_restarted(second_wall: dict[str, object]) -> None:
    pool = SandboxPool(max_jobs=2)
    try:
        pool.start()
        job = {"mode": "tests", "solution": "import time\ntime.sleep(30)", "tests": [[["probe", ["1"]]]]}
        fut = pool.submit(job, Limits(timeout_s=20))
        time.sleep(0.3)
        assert pool.zygote_pid is not None
        os.kill(pool.zygote_pid, signal.SIGKILL)
        assert fut.result(timeout=10).status == "error"
        ok = {"mode": "tests", "solution": "", "tests": [[["probe", ["6 * 7"]]]]}
        assert pool.run_many([ok], Limits(timeout_s=5))[0].status == "ok"
    finally:
        pool.close()


def test_zygotes_start_together_and_each_runs_jobs(second_wall: dict[str, object],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Every zygote is launched before the pool waits for the first one's report (a one-off `finetune
    score` paid each zygote's Python start-up in turn); each then serves jobs."""
    from llm_finetuning.sandbox import pool as pool_module

    events: list[str] = []
    launch, handshake = pool_module._Zygote.launch, pool_module._Zygote.handshake

    def recording_launch(config: dict[str, object]) -> object:
        events.append("launch")
        return launch(config)

    def recording_handshake(proc: subprocess.Popen[bytes], stderr: object, index: int) -> object:
        events.append("handshake")
        return handshake(proc, stderr, index)

    monkeypatch.setattr(pool_module._Zygote, "launch", staticmethod(recording_launch))
    monkeypatch.setattr(pool_module._Zygote, "handshake", staticmethod(recording_handshake))
    pool = SandboxPool(max_jobs=3, zygotes=3)
    try:
        pool.start()
        assert events == ["launch"] * 3 + ["handshake"] * 3
        ok = {"mode": "tests", "solution": "", "tests": [[["probe", ["6 * 7"]]]]}
        assert [r.status for r in pool.run_many([ok] * 9, Limits(timeout_s=5))] == ["ok"] * 9
    finally:
        pool.close()


def test_reward_module_imports_no_ml_library() -> None:
    code = ("import sys, llm_finetuning.rewards.unit_tests, llm_finetuning.sandbox\n"
            "bad = [m for m in ('torch', 'transformers', 'trl', 'numpy', 'datasets') if m in sys.modules]\n"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_second_wall_caps_this_test_process(second_wall: dict[str, object]) -> None:
    import resource

    assert resource.getrlimit(resource.RLIMIT_AS)[1] <= 16 << 30
    assert resource.getrlimit(resource.RLIMIT_FSIZE)[1] <= 2 << 30
    if second_wall["pids_cgroup"] is not None:
        assert str(second_wall["pids_cgroup"]).rsplit("/", 1)[1] in Path("/proc/self/cgroup").read_text()


def test_process_limit_is_per_job(ns_pool: SandboxPool) -> None:
    """A bounded probe (50 forks, not a bomb): each job gets its own 32 processes, however many run."""
    probe = ("import os, time\nn = 0\nfor _ in range(50):\n    try:\n        pid = os.fork()\n"
             "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n"
             "    n += 1\n")
    job = {"mode": "tests", "solution": probe, "tests": [[["probe", ["n"]]]]}
    results = ns_pool.run_many([job] * 3, Limits(timeout_s=5, nproc=32))
    counts = [json.loads(r.records[4:4 + int.from_bytes(r.records[:4], "big")])[3][0][1]["i"] for r in results]
    assert counts == ["31", "31", "31"]  # 32 with the job's first process, in each of three concurrent jobs


def test_namespaces_tier_without_host_root(second_wall: dict[str, object]) -> None:
    """Root inside a user namespace (as in a rootless container) takes the unprivileged path: the
    zygote maps only its own uid, and still gets every namespace and the pivot_root."""
    import shutil

    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) here")
    code = (
        "from llm_finetuning.sandbox import SandboxPool\n"
        "from llm_finetuning.rewards.unit_tests import UnitTests\n"
        "p = SandboxPool(max_jobs=2, isolation='namespaces'); iso = p.start()\n"
        "r = UnitTests(timeout_s=5); r.pool = p\n"
        "print(iso.tier, iso.facts['pivot_root'], r(prompts=['', ''], completions=['def f(x): return x*x',"
        " 'import socket\\nsocket.socket()\\ndef f(x): return x*x'], tests=[['assert f(2) == 4']] * 2))\n"
        "p.close()\n"
    )
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"user namespaces are not available to this user: {probe.stderr.decode()[-200:]}")
    out = subprocess.run(["unshare", "--user", "--map-root-user", sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["namespaces", "True", "[1.0,", "0.0]"]


@pytest.mark.parametrize(("tier", "forker"), [("namespaces", True), ("namespaces", False), ("basic", False)])
def test_a_job_the_kernel_will_not_fork_comes_back_as_an_error(second_wall: dict[str, object], tier: str,
                                                               forker: bool) -> None:
    """A pids cgroup with room for the pool's own processes only: the job's clone fails (EAGAIN), and
    the job is reported as an error (scored 0), not as a job that ran and wrote nothing; the zygote
    carries on."""
    # The waiter outside the pool's pid namespace, the zygote, the forker; the basic tier: the zygote.
    own = 1 if tier == "basic" else 3 if forker else 2
    pool = SandboxPool(max_jobs=1, zygotes=1, isolation=tier, max_pids=own, forker=forker)
    try:
        iso = pool.start()
        if pool.cgroup_path is None or not iso.active:
            pytest.skip(f"no pids cgroup or no namespaces tier here: {iso.facts}")
        job = {"mode": "tests", "solution": "", "tests": [[["probe", ["6 * 7"]]]]}
        assert [r.status for r in pool.run_many([job, job], Limits(timeout_s=5))] == ["error", "error"]
        zygote = pool.zygote_pid
        (pool.cgroup_path / "pids.max").write_text("64")
        assert pool.run_many([job], Limits(timeout_s=5))[0].status == "ok"
        assert pool.zygote_pid == zygote  # the same zygote, not a restarted one
    finally:
        pool.close()
