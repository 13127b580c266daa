"""`finetune status RUN_DIR [--json]`: is the run training, finished, failed, stopped or not started.

Exit 0 running or finished (and not_started: nothing is wrong yet); 1 failed or stopped; 2 unusable (not
a rendered run directory). Answers in well under a second: no ML library, the diagnose rules run in
process. The logic lives in llm_finetuning.launch.detach.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from llm_finetuning.errors import EXIT_OK, EXIT_REJECTED

if TYPE_CHECKING:
    from llm_finetuning.launch.detach import RunStatus


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    s = int(round(seconds))
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def render_status(run_dir: Path, status: RunStatus) -> str:
    """The human form: one summary line, then pid/log, the finding, how it ended, what to run next."""
    from llm_finetuning.launch.detach import RunState

    step = f"step {status['step']} of {status['max_steps'] if status['max_steps'] is not None else '?'}"
    reward = "n/a" if status["reward"] is None else f"{status['reward']:.3g}"
    head = f"{run_dir}: {status['state']}, {step}, reward {reward}, elapsed {_duration(status['elapsed_s'])}"
    if status["state"] == RunState.RUNNING:
        head += f", ETA {_duration(status['eta_s'])}"
    lines = [head]
    where = [f"pid {status['pid']}"] if status["pid"] is not None else []
    where += [f"log {status['log']}"] if status["log"] else []
    if where:
        lines.append("  " + "; ".join(where))
    if status["exit_code"] is not None or status["signal"]:
        how = f"exit code {status['exit_code']}" if status["exit_code"] is not None else f"signal {status['signal']}"
        lines.append(f"  ended with {how}")
    elif status["state"] == RunState.FAILED and status["pid"] is not None:
        lines.append("  ended without an exit record: its process group was killed (SIGKILL, out of memory) "
                     "or the machine restarted")
    if status["checkpoint"] and status["state"] in (RunState.STOPPED, RunState.FAILED):
        lines.append(f"  last complete checkpoint: {status['checkpoint']}")
    finding = status["finding"]
    if finding is None:
        lines.append("  finding: none (healthy, or too few steps to tell)")
    else:
        variant = f" -> try {finding['variant']}" if finding["variant"] else ""
        lines.append(f"  finding: {finding['severity']} {finding['id']}: {finding['message']}{variant}")
    if status["log_tail"]:
        lines.append(f"  last lines of {status['log']}:")
        lines += [f"    {line}" for line in status["log_tail"]]
    lines += [f"  next: {cmd}" for cmd in status["next"]]
    return "\n".join(lines)


@click.command("status")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True,
              help='One JSON object: {"state", "step", "max_steps", "reward", "elapsed_s", "eta_s", "pid", "log", '
              '"finding", ...}.')
def command(run_dir: Path, as_json: bool) -> None:
    """Say whether RUN_DIR is running, finished, failed, stopped or not started, with its step of max_steps,
    last mean reward, elapsed time, ETA, pid, log and the most serious diagnose finding.

    Works for runs launched with --detach (launch.pid, launch.exit.json) and in the foreground (the
    process table and metrics.jsonl's end marker). A failed run shows the last lines of its log.
    Exit 0 running, finished or not started; 1 failed or stopped; 2 not a rendered run directory."""
    from llm_finetuning.launch.detach import RunState, run_status

    status = run_status(run_dir)
    if as_json:
        click.echo(json.dumps(status, indent=2))
    else:
        click.echo(render_status(run_dir, status))
    sys.exit(EXIT_REJECTED if status["state"] in (RunState.FAILED, RunState.STOPPED) else EXIT_OK)
