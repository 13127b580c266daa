"""`finetune launch RUN_DIR [--resume] [--plan]`: re-verify the manifest and the gate, then train.

Exit 0 trained to max_steps; 1 refused (an edited rendered file, a changed brief or record, a failing
gate, a run stopped by a signal after its checkpoint); 2 unusable input (no manifest, vLLM missing).
Heavy imports happen only after verification, inside llm_finetuning.launch.trainer.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import click

from llm_finetuning.errors import EXIT_REJECTED


def _run_script(run_dir: Path, resume: bool) -> int:
    """Run launch.sh in its own process group, forwarding SIGINT/SIGTERM to the whole group."""
    cmd = ["bash", str(run_dir / "launch.sh")] + (["--resume"] if resume else [])
    proc = subprocess.Popen(cmd, cwd=run_dir, start_new_session=True)

    def forward(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = proc.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return EXIT_REJECTED if code < 0 or code > 2 else code


@click.command("launch")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--resume", is_flag=True, help="Continue from the last complete checkpoint.")
@click.option("--plan", "plan_only", is_flag=True,
              help="Verify, print what would run as JSON (with any missing backend), and stop.")
def command(run_dir: Path, resume: bool, plan_only: bool) -> None:
    """Verify RUN_DIR (manifest, brief, records, gate, vLLM) and train it with TRL's GRPOTrainer."""
    from llm_finetuning.launch import LaunchRefused, launch_plan, verify_run

    try:
        run = verify_run(run_dir, check_backend=not plan_only)
    except LaunchRefused as exc:
        click.echo(f"finetune launch: {run_dir} is refused:", err=True)
        for line in exc.lines:
            click.echo(f"  {line}", err=True)
        sys.exit(exc.exit_code)
    plan = launch_plan(run, resume)
    if plan_only:
        click.echo(json.dumps(plan, indent=2))
        return
    if plan["how"] == "sbatch":
        click.echo(f"finetune launch: this run spans {plan['nodes']} nodes; submit it to SLURM: {plan['command']}",
                   err=True)
        sys.exit(EXIT_REJECTED)
    if plan["how"] == "launch.sh":
        click.echo(f"finetune launch: {plan['command']}", err=True)
        sys.exit(_run_script(run.run_dir, resume))
    from llm_finetuning.launch.worker import run_worker

    sys.exit(run_worker(run.run_dir, resume, []))
