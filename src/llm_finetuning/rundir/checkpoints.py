"""A run's checkpoints (RUN_DIR/checkpoints/checkpoint-<step>/): a checkpoint counts only once its commit marker exists.

The Trainer writes checkpoint-<step>/ file by file; a run killed halfway leaves a folder that looks like
a checkpoint but is not one. After everything in it is written and fsynced, `commit_checkpoint` writes
COMPLETE atomically (temp file, fsync, os.replace, then the directory fsync). `--resume` takes the
newest committed checkpoint and moves uncommitted ones aside. Pure: no torch.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from llm_finetuning.errors import Problem
from llm_finetuning.fileio import atomic_write_bytes, fsync_dir, fsync_file
from llm_finetuning.rundir import CHECKPOINTS, TRAINER_STATE

MARKER = "COMPLETE"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def commit_checkpoint(folder: Path, step: int) -> None:
    """fsync every file of `folder`, then write its COMPLETE marker atomically."""
    for root, _dirs, files in os.walk(folder):
        for name in files:
            fsync_file(Path(root) / name)
        fsync_dir(Path(root))
    atomic_write_bytes(folder / MARKER, (json.dumps({"step": step}) + "\n").encode("utf-8"))


def is_complete(folder: Path) -> bool:
    return (folder / MARKER).is_file() and (folder / TRAINER_STATE).is_file()


def checkpoints(output_dir: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every checkpoint-<step> folder, oldest first."""
    if not output_dir.is_dir():
        return []
    found = []
    for child in output_dir.iterdir():
        m = _CHECKPOINT.match(child.name)
        if m and child.is_dir():
            found.append((int(m.group(1)), child))
    return sorted(found)


def complete_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every committed checkpoint of RUN_DIR, oldest first."""
    return [(step, path) for step, path in checkpoints(Path(run_dir) / CHECKPOINTS) if is_complete(path)]


def checkpoint_dirs(run_dir: Path) -> list[Path]:
    """Every checkpoint folder, committed or not, of a run directory (RUN_DIR/checkpoints/checkpoint-N) or of a
    bare TRL output_dir (RUN_DIR/checkpoint-N), oldest step first: what diagnose reads trainer states from."""
    found = checkpoints(Path(run_dir) / CHECKPOINTS) + checkpoints(Path(run_dir))
    return [path for _, path in sorted(found)]


def last_complete_checkpoint(output_dir: Path) -> Path | None:
    complete = [path for _, path in checkpoints(output_dir) if is_complete(path)]
    return complete[-1] if complete else None


def set_aside_incomplete(output_dir: Path) -> list[Path]:
    """Rename uncommitted checkpoint folders to incomplete-checkpoint-<step> so nothing resumes from them."""
    moved = []
    for step, path in checkpoints(output_dir):
        if not is_complete(path):
            target = output_dir / f"incomplete-checkpoint-{step}"
            n = 1
            while target.exists():
                n += 1
                target = output_dir / f"incomplete-checkpoint-{step}.{n}"
            os.replace(path, target)
            moved.append(target)
    return moved


def start_problem(output_dir: Path, resume: bool) -> Problem | None:
    """Why a launch may not start on what `output_dir` holds, or None: --resume needs a complete checkpoint;
    a fresh launch must not overwrite an earlier launch's checkpoints."""
    if resume and last_complete_checkpoint(output_dir) is None:
        return Problem("no_checkpoint", "--resume", f"no complete checkpoint in {output_dir}.",
                       "launch without --resume to start from the beginning")
    if not resume and checkpoints(output_dir):
        return Problem("checkpoints_exist", "", f"{output_dir} already holds checkpoints of an earlier launch.",
                       "continue it with `finetune launch RUN_DIR --resume`, or render into a new RUN_DIR")
    return None
