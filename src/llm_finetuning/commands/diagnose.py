"""`finetune diagnose RUN_DIR [--json] [--plot FILE.png] [--follow]`: failure modes and the variant to try.

`--follow` watches a live run until its end marker, the end of a detached run's processes (stopped or
failed: `finetune status` says which), `--timeout` or Ctrl-C.

Exit codes: 0 healthy (no failure mode; an `info` finding such as `converged` may show), 1 findings, 2 unusable
input (no run, no logged step). Writes RUN_DIR/diagnosis.json (the `--json` object bound to the brief and the
metrics file by sha256) unless `--no-write`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from llm_finetuning.commands._common import fail
from llm_finetuning.errors import EXIT_OK, EXIT_REJECTED, UnusableInput


@click.command("diagnose")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: {healthy, findings}.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Draw reward, per-reward means, entropy, length and clipped ratio with the findings marked.")
@click.option("--follow", is_flag=True, help="Watch a live run: re-read the metrics and print findings as they "
              "appear, until the run's end marker, the end of a detached run, --timeout or Ctrl-C.")
@click.option("--interval", type=click.FloatRange(min=0.01), default=10.0, show_default=True,
              help="Seconds between reads with --follow.")
@click.option("--timeout", type=click.FloatRange(min=0), default=None,
              help="Stop following after this many seconds.")
@click.option("--brief", "brief_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The run's brief (default: the one manifest.json names).")
@click.option("--eval", "eval_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Held-out scores from a stricter verifier: JSONL of {\"step\", \"score\"} "
              "(default: RUN_DIR/eval.jsonl when present).")
@click.option("--architecture", type=click.Choice(["moe", "dense"]), default=None,
              help="The model's architecture, when neither the brief nor a checkpoint says.")
@click.option("--correctness", multiple=True, help="A reward name that measures correctness (repeatable; "
              "default: the brief's verifier rewards, else guessed from the names).")
@click.option("--no-write", is_flag=True, help="Do not write RUN_DIR/diagnosis.json.")
def command(run_dir: Path, as_json: bool, plot_path: Path | None, follow: bool, interval: float,
            timeout: float | None, brief_path: Path | None, eval_path: Path | None, architecture: str | None,
            correctness: tuple[str, ...], no_write: bool) -> None:
    """Name the failure mode of a GRPO run from its logs, and the variant or fix to try."""
    from llm_finetuning.diagnose import (
        diagnose,
        diagnosis_json,
        diagnosis_record,
        failure_modes,
        load_context,
        load_trajectory,
        render_text,
    )
    from llm_finetuning.rundir import DIAGNOSIS, write_diagnosis

    ctx = load_context(run_dir, brief_path, eval_path, architecture, list(correctness))
    for note in ctx.notes:
        click.echo(f"note: {note}", err=True)

    if follow:
        from llm_finetuning.diagnose.follow import follow as follow_run
        from llm_finetuning.diagnose.report import finding_line
        from llm_finetuning.launch.detach import detached_run_ended

        click.echo(f"following {run_dir} every {interval:g} s (Ctrl-C to stop)", err=True)
        result = follow_run(run_dir, ctx, lambda f, t: click.echo(finding_line(f, t), err=as_json),
                            interval=interval, timeout=timeout, run_ended=lambda: detached_run_ended(run_dir))
        if result.trajectory is None:
            fail(result.last_error or UnusableInput(f"no metrics appeared in {run_dir}",
                                                    "check that the run started", str(run_dir)), as_json)
        traj, findings = result.trajectory, result.findings
        if result.stopped != "ended":
            click.echo(f"stopped following ({result.stopped}) at step {traj.last_step}"
                       + (f"; see `finetune status {run_dir}`" if result.stopped.startswith("run ended") else ""),
                       err=True)
    else:
        traj = load_trajectory(run_dir)
        findings = diagnose(traj, ctx)
    if traj.skipped_lines:
        click.echo(f"note: skipped {traj.skipped_lines} unreadable line(s) in {traj.source}", err=True)

    root = run_dir if run_dir.is_dir() else run_dir.parent
    if not no_write:
        try:
            write_diagnosis(root, diagnosis_record(traj, findings, ctx, root))
        except OSError as exc:
            click.echo(f"warning: could not write {root / DIAGNOSIS}: {exc.strerror}", err=True)
    if plot_path is not None:
        from llm_finetuning.diagnose.plot import plot_run

        try:
            plot_run(traj, findings, plot_path, title=ctx.brief_name or root.resolve().name,
                     reward_range=ctx.reward_range)
        except (OSError, ImportError) as exc:
            click.echo(f"warning: could not draw {plot_path}: {exc}", err=True)
        else:
            click.echo(f"plot: {plot_path}", err=True)

    if as_json:
        click.echo(json.dumps(diagnosis_json(findings), indent=2))
    else:
        click.echo(render_text(traj, findings, f"finetune diagnose {run_dir}", str(run_dir)))
    sys.exit(EXIT_REJECTED if failure_modes(findings) else EXIT_OK)
