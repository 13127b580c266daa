"""Fixtures for the sandbox tests, and the second wall around them.

Before the first hostile case runs, this test process caps itself (a pids cgroup where one can be made,
and hard address-space and file-size rlimits that the sandbox inherits), so a sandbox bug cannot take the
machine down. Hostile cases refuse to run (skip, with the reason) unless the sandbox reports itself
active; tests/sandbox/test_pool.py asserts that it does on Linux x86_64/aarch64.
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
from collections.abc import Iterator

import pytest

from llm_finetuning.sandbox import SandboxPool, cgroup

WALL_PIDS = 512
WALL_AS = 16 << 30
WALL_FSIZE = 2 << 30


@pytest.fixture(scope="session")
def second_wall() -> Iterator[dict[str, object]]:
    """Cap this test process (and so the sandbox it starts) before any hostile code runs."""
    saved = {r: resource.getrlimit(r) for r in (resource.RLIMIT_AS, resource.RLIMIT_FSIZE)}
    for res, cap in ((resource.RLIMIT_AS, WALL_AS), (resource.RLIMIT_FSIZE, WALL_FSIZE)):
        soft, hard = saved[res]
        new_hard = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
        new_soft = new_hard if soft == resource.RLIM_INFINITY else min(soft, new_hard)
        resource.setrlimit(res, (new_soft, new_hard))
    path = cgroup.make_pids_cgroup(f"llmft-tests-{os.getpid()}", WALL_PIDS)
    if path is not None:
        try:
            cgroup.join(path)
        except OSError:
            cgroup.remove(path)
            path = None
    yield {"pids_cgroup": path, "rlimits": {"AS": WALL_AS, "FSIZE": WALL_FSIZE}}
    if path is not None:
        cgroup.leave(path)
    for res, (soft, hard) in saved.items():
        with contextlib.suppress(ValueError, OSError):  # not root: the lowered limits stay for the session
            resource.setrlimit(res, (soft, hard))


def _pool(tier: str, second_wall: dict[str, object], forker: bool = True) -> Iterator[SandboxPool]:
    pool = SandboxPool(max_jobs=4, isolation=tier, forker=forker)
    try:
        iso = pool.start()
    except Exception as exc:  # noqa: BLE001 - any failure to start means: refuse
        pytest.skip(f"sandbox tier {tier!r} is not available here: {exc}")
    if not iso.active:
        pool.close()
        pytest.skip(f"sandbox tier {tier!r} does not report itself active: {iso.facts}")
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def ns_pool(second_wall: dict[str, object]) -> Iterator[SandboxPool]:
    """The namespaces tier (user, net, mount, pid namespaces; pivot_root)."""
    yield from _pool("namespaces", second_wall)


@pytest.fixture(scope="session")
def ns_direct_pool(second_wall: dict[str, object]) -> Iterator[SandboxPool]:
    """The namespaces tier with jobs forked by the zygote itself (kernels without pidfds)."""
    yield from _pool("namespaces", second_wall, forker=False)


@pytest.fixture(scope="session")
def basic_pool(second_wall: dict[str, object]) -> Iterator[SandboxPool]:
    """The fallback tier, forced: no namespaces; rlimits, seccomp, subreaper, uid 65534 as root."""
    yield from _pool("basic", second_wall)


@pytest.fixture(params=["namespaces", "namespaces-direct", "basic"])
def pool(request: pytest.FixtureRequest) -> SandboxPool:
    fixture = {"namespaces": "ns_pool", "namespaces-direct": "ns_direct_pool", "basic": "basic_pool"}[request.param]
    return request.getfixturevalue(fixture)  # type: ignore[no-any-return]


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("hostile") is None:
        return
    if platform.system() != "Linux":
        pytest.skip("hostile cases run only where the sandbox can isolate them (Linux)")
    # The wall must exist before the case runs; pool fixtures request it, and a case that uses none
    # of them is refused.
    if not {"ns_pool", "ns_direct_pool", "basic_pool", "pool", "second_wall"} & set(getattr(item, "fixturenames", [])):
        pytest.fail("a hostile test must use a sandbox pool fixture (which builds the second wall)")
