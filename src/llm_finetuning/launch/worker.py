"""What each training process runs: `python -m llm_finetuning.launch.worker RUN_DIR [--resume]`.

launch.sh and sbatch.sh start it through `accelerate launch`; `finetune launch` calls `run_worker` in its
own process when the run has a single training process, with the run it verified. Every process started
here verifies the run (manifest, gate, vLLM) before it loads anything heavy, so launching the scripts by hand
skips no check; `run_worker` itself takes the verified run and verifies nothing again. A worker trains under
the run's lock (`launch.runlock`): the one its launch holds, or, started by hand, one rank 0 takes.
`--print-model RUN_DIR` prints the model path the vLLM server must load (embedded/GGUF models resolved).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from llm_finetuning.errors import EXIT_OK, EXIT_REJECTED, render_problems
from llm_finetuning.launch import LaunchRefused, VerifiedRun, runlock, verify_run
from llm_finetuning.launch.detach import forget_stale_launch
from llm_finetuning.rundir import LAUNCH_LOCK, METRICS


def run_worker(run: VerifiedRun, resume: bool, extra_args: list[str], progress: bool = True) -> int:
    """Train a run verified by the caller (`verify_run`); print the outcome on stderr; return the exit code."""
    try:
        from llm_finetuning.launch.trainer import train

        outcome = train(run.run_dir, run.brief, resume=resume, extra_args=extra_args, progress=progress,
                        code=run.code)
    except LaunchRefused as exc:
        print(render_problems(exc.problems, header=exc.header(run.run_dir)), file=sys.stderr)
        return exc.exit_code
    if int(os.environ.get("RANK", "0")) != 0:
        return EXIT_REJECTED if outcome.stopped_by else EXIT_OK  # rank 0 reports for every process
    if outcome.stopped_by:
        print(f"finetune launch: stopped by {outcome.stopped_by} at step {outcome.global_step} of "
              f"{outcome.max_steps}; checkpoint {outcome.checkpoint}. Continue with: "
              f"finetune launch {run.run_dir} --resume", file=sys.stderr)
        return EXIT_REJECTED
    print(f"finetune launch: trained {outcome.global_step} step(s); model in {outcome.final_model}; metrics in "
          f"{run.run_dir / METRICS}", file=sys.stderr)
    return EXIT_OK


def print_model(run_dir: Path) -> int:
    try:
        run = verify_run(run_dir)
        from llm_finetuning.launch.trainer import _resolve_model

        path, _ = _resolve_model(run.brief)
    except LaunchRefused as exc:
        print(render_problems(exc.problems, header=exc.header(run_dir)), file=sys.stderr)
        return exc.exit_code
    if not path.startswith("/") and (run.brief.folder / path).exists():
        path = str((run.brief.folder / path).resolve())
    print(path)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llm_finetuning.launch.worker")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--vllm-server-host", default=None)
    parser.add_argument("--print-model", action="store_true")
    ns = parser.parse_args(argv)
    if ns.print_model:
        return print_model(ns.run_dir)
    extra = ["--vllm_server_host", ns.vllm_server_host] if ns.vllm_server_host else []
    try:
        run = verify_run(ns.run_dir)
    except LaunchRefused as exc:
        print(render_problems(exc.problems, header=exc.header(ns.run_dir)), file=sys.stderr)
        return exc.exit_code
    lock = _claim_on_rank_zero(run.run_dir)
    if lock is False:
        print(f"finetune launch: {run.run_dir} is already training (another launch holds "
              f"{run.run_dir / LAUNCH_LOCK}); wait for it or stop it first", file=sys.stderr)
        return EXIT_REJECTED
    return run_worker(run, ns.resume, extra)


def _claim_on_rank_zero(run_dir: Path) -> runlock.RunLock | bool | None:
    """The run's lock for a worker: None when the launch that started it holds it (`finetune launch` through
    launch.sh) or on a rank other than 0; otherwise, for launch.sh or `accelerate launch` started by hand, rank 0
    takes it and keeps it for its whole life (False: another launch holds it)."""
    if runlock.held_by_ancestor(run_dir) or os.environ.get("RANK", "0") != "0":
        return None
    lock = runlock.claim(run_dir)
    if lock is None:
        return False
    if not lock.inherited:
        forget_stale_launch(run_dir)
        lock.describe(os.getpid(), " ".join(sys.argv))
    return lock


if __name__ == "__main__":
    sys.exit(main())
