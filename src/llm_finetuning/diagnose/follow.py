"""`finetune diagnose --follow`: re-read a live run's metrics as they grow and report findings as they appear.

Stops when metrics.jsonl gets `finetune launch`'s end marker (`{"event": "end", "step": N}`), when the
run's processes have ended without it (a detached run stopped or failed: `run_ended`), when the timeout
passes, or on Ctrl-C. The clock, sleep and `run_ended` are parameters so tests need not wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from llm_finetuning.diagnose.context import RunContext, read_eval
from llm_finetuning.diagnose.rules import Finding, diagnose
from llm_finetuning.diagnose.trajectory import Trajectory, load_trajectory, read_completions
from llm_finetuning.errors import Severity, UnusableInput
from llm_finetuning.rundir import COMPLETIONS, EVAL_JSONL


@dataclass
class FollowResult:
    """The last trajectory read (None if none ever was), its findings, and why following stopped."""

    trajectory: Trajectory | None
    findings: list[Finding] = field(default_factory=list)
    stopped: str = ""  # "ended" | "run ended without its end marker" | "timeout" | "interrupted"
    last_error: UnusableInput | None = None


def follow(run_dir: Path, ctx: RunContext, on_new: Callable[[Finding, Trajectory], None],
           interval: float = 10.0, timeout: float | None = None,
           sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
           run_ended: Callable[[], bool] = lambda: False) -> FollowResult:
    """Poll until the end marker, the end of the run's processes, the timeout or Ctrl-C; call `on_new` for
    each finding id when it first appears (or turns from warning to error)."""
    start = clock()
    result = FollowResult(None)
    reported: dict[str, Severity] = {}
    completions_size = -1
    eval_size = 0 if ctx.eval_steps else -1  # a file given with --eval stays what it is
    try:
        while True:
            gone = run_ended()  # asked before reading, so the last read holds everything the run wrote
            try:
                traj = load_trajectory(run_dir)
            except UnusableInput as exc:  # no metrics yet, or no step logged yet: wait for the run
                result.last_error = exc
            else:
                result.trajectory, result.last_error = traj, None
                completions = traj.source.parent / COMPLETIONS
                size = completions.stat().st_size if completions.is_file() else 0
                if size != completions_size:  # logged completions grow with the run too
                    ctx.completions, completions_size = read_completions(completions), size
                held_out = traj.source.parent / EVAL_JSONL
                size = held_out.stat().st_size if held_out.is_file() else 0
                if size != eval_size:  # held_out_eval appends scores while the run trains
                    if size:
                        ctx.eval_steps, ctx.eval_scores = read_eval(held_out)
                        ctx.eval_source = str(held_out)
                    eval_size = size
                result.findings = diagnose(traj, ctx)
                for f in result.findings:
                    before = reported.get(f.id)
                    if before is None or (before != Severity.ERROR and f.severity == Severity.ERROR):
                        reported[f.id] = f.severity
                        on_new(f, traj)
                if traj.ended:
                    result.stopped = "ended"
                    return result
            if gone:
                result.stopped = "run ended without its end marker"
                return result
            if timeout is not None and clock() - start >= timeout:
                result.stopped = "timeout"
                return result
            sleep(interval)
    except KeyboardInterrupt:
        result.stopped = "interrupted"
        return result
