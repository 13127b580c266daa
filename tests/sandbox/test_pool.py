"""The pool reports its isolation, survives losing its zygote, and keeps ML libraries out."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import time

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


def test_reward_module_imports_no_ml_library() -> None:
    code = ("import sys, llm_finetuning.rewards.unit_tests, llm_finetuning.sandbox\n"
            "bad = [m for m in ('torch', 'transformers', 'trl', 'numpy', 'datasets') if m in sys.modules]\n"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
