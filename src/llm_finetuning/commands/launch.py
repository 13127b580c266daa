"""`finetune launch RUN_DIR [--resume] [--detach] [--plan]`: re-verify the manifest and the gate, render the
brief again in memory and refuse any file that differs, then train.

Exit 0 trained to max_steps (with --detach: started); 1 refused (an edited rendered file, a file a fresh
render would not write, a changed brief or record, a failing gate, a run already training in RUN_DIR, a
run stopped by a signal after its checkpoint); 2 unusable input (no manifest, vLLM missing). Heavy imports happen only after verification,
inside llm_finetuning.launch.trainer; `--detach` verifies here, then hands the plain launch to a
supervisor in its own session (llm_finetuning.launch.detach) and returns at once.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from llm_finetuning.commands._common import fail
from llm_finetuning.errors import EXIT_REJECTED, Problem, render_problems
from llm_finetuning.launch import LaunchRefused
from llm_finetuning.rundir import LAUNCH_SCRIPT

if TYPE_CHECKING:
    from llm_finetuning.jsonvalue import JsonObject
    from llm_finetuning.launch.runlock import RunLock


def _run_script(run_dir: Path, resume: bool, lock: RunLock) -> int:
    """Run launch.sh in its own process group, forwarding SIGINT/SIGTERM to the whole group, and return once
    every process of that group has exited (a signal can end the shell before its workers saved their
    checkpoint). The shell, and `accelerate launch` after it, hold the run's lock too."""
    cmd = ["bash", str(run_dir / LAUNCH_SCRIPT)] + (["--resume"] if resume else [])
    proc = subprocess.Popen(cmd, cwd=run_dir, start_new_session=True, pass_fds=(lock.fd,),
                            env=lock.child_env(dict(os.environ)))

    def forward(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = proc.wait()
        while _group_alive(proc.pid):
            time.sleep(0.5)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return EXIT_REJECTED if code < 0 or code > 2 else code


def _group_alive(pgid: int) -> bool:
    """A process of group `pgid` (one this process started, so in its own pid namespace) still runs."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _already_training(run_dir: Path) -> LaunchRefused:
    from llm_finetuning.launch.runlock import holder

    pid = holder(run_dir).get("pid", "unknown")
    return LaunchRefused([Problem(
        "already_training", "", f"{run_dir} is already training (pid {pid}).",
        f"wait for it (`finetune status {run_dir}`) or stop it (`finetune stop {run_dir}`) first")])


def _refuse(run_dir: Path, refused: LaunchRefused, as_json: bool = False) -> NoReturn:
    """Print why the launch is refused (text on stderr; with --plan, the JSON error shape on stdout); exit."""
    fail(refused, as_json, subject=run_dir)


def _print_detached(record: JsonObject) -> None:
    q = shlex.quote(str(Path(str(record["log"])).parent))
    click.echo(f"finetune launch: started in the background, pid {record['pid']}; log {record['log']}")
    click.echo(f"  watch:  finetune status {q}")
    click.echo(f"  follow: finetune diagnose {q} --follow --timeout 240")
    click.echo(f"  stop:   finetune stop {q}   (checkpoints first; continue with "
               f"finetune launch {q} --detach --resume)")


@click.command("launch")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--resume", is_flag=True, help="Continue from the last complete checkpoint.")
@click.option("--detach", is_flag=True,
              help="Verify here, then train in the background in its own session (log in RUN_DIR/launch.log, "
              "pid in RUN_DIR/launch.pid) and return at once; watch with `finetune status`, end with `finetune stop`.")
@click.option("--plan", "plan_only", is_flag=True,
              help="Verify, print what would run as JSON (with any missing backend), and stop; a refusal is "
              "printed as JSON too ({\"ok\": false, \"problems\": [...]}).")
def command(run_dir: Path, resume: bool, detach: bool, plan_only: bool) -> None:
    """Verify RUN_DIR (manifest, brief, records, gate, vLLM) and train it with TRL's GRPOTrainer.

    In the foreground it returns when training ends: exit 0 trained, 1 refused or stopped by a signal
    (after a checkpoint), 2 unusable. With --detach it returns at once (exit 0 started) and the run goes
    on after the shell that started it ends. A run already training in RUN_DIR (it holds RUN_DIR/launch.lock)
    is refused (exit 1), naming its pid, and goes on untouched."""
    from llm_finetuning.launch import launch_plan, verify_run
    from llm_finetuning.launch.detach import forget_stale_launch
    from llm_finetuning.launch.runlock import claim, handed_down, is_held

    if not plan_only and not handed_down(run_dir) and is_held(run_dir):
        _refuse(run_dir, _already_training(run_dir))  # before verifying: the refusal names the running launch
    try:
        run = verify_run(run_dir, check_backend=not plan_only)
    except LaunchRefused as exc:
        _refuse(run_dir, exc, as_json=plan_only)
    plan = launch_plan(run, resume)
    mode = run.topology.launch_mode
    if plan_only:
        click.echo(render_problems(run.warnings, as_json=True, extra=dict(plan)))
        return
    if mode == "sbatch":
        _refuse(run_dir, LaunchRefused([Problem("several_nodes", "hardware.nodes", f"this run spans {plan['nodes']} "
                                                "nodes, which one launch here cannot start.",
                                                f"submit it to SLURM: {plan['command']}")]))
    if detach:
        from llm_finetuning.launch.detach import detach_problem, start_detached

        problem = detach_problem(run.run_dir, resume)
        if problem:  # what training would refuse in the background, refused here in the same words
            _refuse(run_dir, LaunchRefused([problem]))
    lock = claim(run.run_dir)  # held until this process ends; a refused launch has touched nothing
    if lock is None:
        _refuse(run_dir, _already_training(run_dir))
    if detach:
        _print_detached(start_detached(run.run_dir, resume, lock))
        return
    if not lock.inherited:
        forget_stale_launch(run.run_dir)
        lock.describe(os.getpid(), shlex.join(["finetune", "launch", str(run.run_dir), *(["--resume"] if resume else [])]))
    if mode == "script":
        click.echo(f"finetune launch: {plan['command']}", err=True)
        sys.exit(_run_script(run.run_dir, resume, lock))
    from llm_finetuning.launch.worker import run_worker

    sys.exit(run_worker(run, resume, []))
