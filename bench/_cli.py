"""`finetune VERB ...` as the benchmarks run it: a fresh process of this interpreter, its exit code checked."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str  # empty unless captured
    seconds: float


def finetune(*args: str, expect: tuple[int, ...] = (0,), capture: bool = False) -> Ran:
    """Run the CLI; stop the benchmark when it exits with a code outside `expect`. Uncaptured output streams
    to this process's stdout, after the command line, so a device call's log shows what ran."""
    if not capture:
        print("$ finetune", " ".join(args), flush=True)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "llm_finetuning.cli", *args], text=True, check=False,
                          stdout=subprocess.PIPE if capture else None)
    if proc.returncode not in expect:
        raise SystemExit(f"finetune {' '.join(args)} exited {proc.returncode}")
    return Ran(proc.returncode, proc.stdout or "", time.monotonic() - started)


def finetune_side_by_side(*commands: tuple[str, ...], expect: tuple[int, ...] = (0,),
                          capture: bool = False) -> list[Ran]:
    """Several CLI commands at once (runs sharing one GPU), each checked as `finetune` checks one; their
    results in the order given."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(commands)) as pool:
        futures = [pool.submit(finetune, *args, expect=expect, capture=capture) for args in commands]
        return [f.result() for f in futures]
