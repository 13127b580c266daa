"""An interpreter whose virtual environment lives under /tmp: each job has a /tmp of its own, and still
imports what that environment holds, read-only (docs/sandbox.md)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

CHILD = """
import json, sys
from llm_finetuning.sandbox import Limits, SandboxPool
from llm_finetuning.sandbox.verdicts import failed_test_reasons, prepare_test
solution = '''
import os, sys, lf_under_tmp
def value():
    return lf_under_tmp.VALUE
def writes(path):
    try:
        with open(path, "w") as fh:
            fh.write("x")
        return True
    except OSError:
        return False
'''
tests = [prepare_test(t) for t in json.loads(sys.argv[1])]
pool = SandboxPool(max_jobs=1, zygotes=1, isolation="namespaces")
iso = pool.start()
[future] = pool.submit_many([{"mode": "tests", "solution": solution, "tests": [t.steps for t in tests]}],
                            Limits(timeout_s=10.0))
print(json.dumps({"tier": iso.tier, "facts": iso.facts, "why": failed_test_reasons(tests, future.result().records)}))
pool.close()
"""


@pytest.fixture(scope="module")
def venv_under_tmp() -> Iterator[Path]:
    """A venv made under /tmp by this interpreter's base, holding one tiny pure package."""
    folder = Path(tempfile.mkdtemp(prefix="llmft-venv-", dir="/tmp"))
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    (purelib / "lf_under_tmp").mkdir(parents=True)
    (purelib / "lf_under_tmp" / "__init__.py").write_text("VALUE = 42\n")
    yield venv
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(platform.system() != "Linux", reason="the namespaces tier is Linux's")
def test_a_venv_under_tmp_is_visible_read_only_inside_each_job(venv_under_tmp: Path) -> None:
    package = next(venv_under_tmp.glob("lib/python*/site-packages/lf_under_tmp"))
    tests = ["assert value() == 42",
             f"assert sys.prefix == {str(venv_under_tmp)!r}",
             f"assert writes({str(package / 'planted.py')!r}) is False",  # the venv is read-only
             "assert writes('/tmp/scratch.txt') is True"]  # and the job's own /tmp still writable
    python = venv_under_tmp / "bin" / "python"
    proc = subprocess.run([str(python), "-c", CHILD, json.dumps(tests)], env={**os.environ, "PYTHONPATH": str(SRC)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    if out["tier"] != "namespaces":
        pytest.skip(f"the namespaces tier is not available here: {out['facts']}")
    assert out["why"] == [None] * len(tests)
    assert str(venv_under_tmp) in out["facts"]["bound_again_in_each_job"]
    assert not (package / "planted.py").exists()
