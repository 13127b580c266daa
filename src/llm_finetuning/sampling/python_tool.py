"""`llm_finetuning.sampling.python_tool:run_python`: a tool that runs the model's Python in the sandbox.

For a tool-use brief whose model should compute by writing code (`episode.tools:
["llm_finetuning.sampling.python_tool:run_python"]`). The code is the model's, so it never runs in the
sampling or training process: it runs as one stdin job of the product's sandbox pool
(docs/sandbox.md), with its limits, and the tool returns what it printed. A time-out, a crash or output
past the limit raises, and the episode loop hands the error to the model as the tool's result.
"""

from __future__ import annotations

from llm_finetuning.sandbox import Limits, get_pool
from llm_finetuning.sandbox.verdicts import Malformed, split_records

LIMITS = Limits(timeout_s=5.0, memory_mb=256, output_bytes=1 << 16)


def run_python(code: str) -> str:
    """Run a Python program and return what it prints to standard output.

    Args:
        code: The whole program; print the values you need.
    """
    if not isinstance(code, str):
        raise TypeError("code must be a string holding a Python program")
    [result] = get_pool().run_many([{"mode": "io", "solution": code, "inputs": [""]}], LIMITS)
    if result.status == "timeout":
        raise TimeoutError(f"the program ran past {LIMITS.timeout_s:g} s")
    if result.status != "ok":
        raise RuntimeError(f"the program did not finish ({result.status}{': ' + result.detail if result.detail else ''})")
    try:
        records = split_records(result.records)
    except Malformed as exc:
        raise RuntimeError(f"the sandbox's output was unreadable ({exc})") from None
    for rec in records:
        if rec[0] == "o" and len(rec) == 5:
            if rec[3]:
                raise RuntimeError(f"the program printed more than {LIMITS.output_bytes} bytes")
            if rec[4] not in (0, None):
                raise RuntimeError(f"the program exited with status {rec[4]}; it printed: {str(rec[2])[-300:]!r}")
            return str(rec[2])
    raise RuntimeError("the program produced no result")
