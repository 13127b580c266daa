"""How many torch threads CPU work gets: the sampler and `finetune launch` size them the same way.

On an oversubscribed CPU, OpenMP threads wait for each other at every barrier: measured here with a
load average of 10 on 2 cores, `generate` ran 8-10x slower on 2 threads than on 1. So CPU work takes
the cores other work leaves idle, at least one, at most torch's default. No torch import here: the
caller passes its `torch` module.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

ENV = "LLM_FINETUNING_CPU_THREADS"


def cpu_threads(default: int, load: float | None = None, cores: int | None = None) -> int:
    """$LLM_FINETUNING_CPU_THREADS, else the cores the 1-minute load average leaves idle (1 to `default`)."""
    env = os.environ.get(ENV)
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            return default
    idle = (cores if cores is not None else os.cpu_count() or 1) - load
    return max(1, min(default, int(idle + 0.5)))


def size_torch_threads(torch: ModuleType, what: str) -> int:
    """Set torch's intra-op threads for CPU work by `cpu_threads`, say so on stderr, and return the number."""
    default = int(torch.get_num_threads())
    threads = cpu_threads(default)
    torch.set_num_threads(threads)
    why = "$" + ENV if os.environ.get(ENV, "").isdigit() else f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    print(f"{what} on CPU: {threads} torch thread(s) of {default} ({why})", file=sys.stderr, flush=True)
    return threads
