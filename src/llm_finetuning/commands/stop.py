"""`finetune stop RUN_DIR [--wait SECONDS]`: stop a detached run at the next step boundary, after a checkpoint.

Writes RUN_DIR/stop.request, which the trainer reads at the end of each step, and from the run's own pid
namespace also sends SIGTERM to its process group (the trainer saves a checkpoint at the end of the current
step and exits; `finetune launch RUN_DIR --detach --resume` continues); records in launch.pid that the stop
was asked, so `finetune status` says stopped rather than failed. Whether a run is there is its lock's answer,
the same from any pid namespace. Exit 0 signalled (or already ended), 2
nothing runs there (no detached launch in RUN_DIR).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from llm_finetuning.errors import EXIT_OK
from llm_finetuning.rundir import STOP_REQUEST


@click.command("stop")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--wait", "wait_s", type=click.FloatRange(min=0), default=None,
              help="Wait up to this many seconds for the checkpoint and the exit, then print the status.")
def command(run_dir: Path, wait_s: float | None) -> None:
    """Ask the detached run in RUN_DIR to checkpoint and stop (SIGTERM to its process group).

    The trainer saves a checkpoint at the end of the current step and exits; `finetune status` then says
    stopped, and `finetune launch RUN_DIR --detach --resume` continues. Exit 0 signalled (or already
    ended), 2 nothing runs there."""
    from llm_finetuning.launch.detach import (
        ALREADY_ASKED,
        ENDED,
        request_stop,
        run_status,
        wait_for_exit,
    )

    record, outcome = request_stop(run_dir)  # NothingRuns: exit 2 through the CLI's one conversion
    q = shlex.quote(str(run_dir))
    if outcome == ENDED:
        click.echo(f"finetune stop: the run in {run_dir} (pid {record['pid']}) has already ended; "
                   f"see `finetune status {q}`")
        sys.exit(EXIT_OK)
    if outcome == ALREADY_ASKED:
        click.echo(f"finetune stop: a stop was asked at {record['stop_requested_at']}; pid {record['pid']} is "
                   f"finishing its step and checkpoint (not signalled again: a second SIGTERM ends it at once, "
                   f"without the checkpoint; `kill -KILL -- -{record['pgid']}` if it must end now)")
    elif record["stop_signal"]:
        click.echo(f"finetune stop: sent SIGTERM to pid {record['pid']} (process group {record['pgid']}); it saves "
                   f"a checkpoint at the end of the current step, then exits. Continue later with "
                   f"`finetune launch {q} --detach --resume`")
    else:
        click.echo(f"finetune stop: asked the run to stop ({STOP_REQUEST}; it runs in another pid namespace, so no "
                   f"signal); it saves a checkpoint at the end of the current step, then exits. Continue later "
                   f"with `finetune launch {q} --detach --resume`")
    if wait_s is None:
        sys.exit(EXIT_OK)
    if wait_for_exit(run_dir, wait_s):
        status = run_status(run_dir)
        click.echo(f"finetune stop: {status['state']} at step {status['step']}; checkpoint {status['checkpoint']}")
    else:
        click.echo(f"finetune stop: still running after {wait_s:g} s (a long step, or saving); check with "
                   f"`finetune status {q}`", err=True)
    sys.exit(EXIT_OK)
