"""Runs that outlive the caller's shell: `finetune launch --detach`, `finetune status`, `finetune stop`.

An agent's shell stops a command after a few minutes; a training run takes longer. `finetune launch
--detach` verifies the run in the foreground, then starts a supervisor in its own session
(`python -m llm_finetuning.launch.detach RUN_DIR -- CMD...`, stdin /dev/null) and returns. The supervisor
runs CMD (the plain `finetune launch RUN_DIR [--resume]`, which verifies again and trains in process or
through launch.sh) in the session's process group, so one SIGTERM to the group from `finetune stop`
reaches the trainer; it waits for the run and records how it ended. Linux only (/proc). Files in RUN_DIR:

- `launch.pid`: JSON written atomically by the launcher: `pid` and `pgid` of the supervisor, its
  `start_time_ticks` (field 22 of /proc/PID/stat, so a reused pid is not mistaken for the run),
  `started_at`, `command`, `resume`, `log`; `finetune stop` adds `stop_requested_at` and `stop_signal`.
- `launch.log`: stdout and stderr of every detached launch, appended.
- `launch.exit.json`: written atomically by the supervisor when the run ends, also when it fails:
  `pid`, `start_time_ticks`, `exit_code` (null when a signal ended it), `signal`, `ended_at`.

The state `finetune status` reports comes from these files, the process table and metrics.jsonl. A run
launched in the foreground has no pid file: its processes are found by their command lines, and its end
by the end marker in metrics.jsonl. Light: the standard library, the records' atomic writer and the
diagnose rules; no ML library.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from llm_finetuning.errors import Problem, TextEnum, UnusableInput
from llm_finetuning.fileio import atomic_write_json, read_json_object, utc_now
from llm_finetuning.rundir import CHECKPOINTS, GRPO_CONFIG, LAUNCH_EXIT, LAUNCH_LOG, LAUNCH_PID, LAUNCH_SCRIPT
from llm_finetuning.rundir.checkpoints import last_complete_checkpoint, start_problem
from llm_finetuning.rundir.manifest import load_manifest

PID_FORMAT = 1



class RunState(TextEnum):
    """What `finetune status` says of a run (docs/render-launch.md): training now, reached its last step,
    ended otherwise, ended after `finetune stop` (or a signal it checkpointed on), or never launched."""

    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"
    NOT_STARTED = "not_started"


LOG_TAIL_LINES = 15
_LOG_HEADER = "=== finetune launch --detach"  # starts each launch's part of launch.log
# Modules whose command line, with the run directory among its arguments, marks a process training it.
_LAUNCH_MODULES = ("llm_finetuning.launch.worker", "llm_finetuning.launch.detach")


def proc_start_ticks(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat field 22); None when it is gone
    or a zombie (it ended and nobody has reaped it yet)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the name in parentheses may hold spaces
    if not fields or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _read_record(path: Path) -> dict[str, Any] | None:
    """A JSON object from launch.pid or launch.exit.json; None when absent or unreadable."""
    try:
        return read_json_object(path, "launch record")
    except UnusableInput:
        return None


def read_launch(run_dir: Path) -> dict[str, Any] | None:
    """RUN_DIR/launch.pid, or None when there is none (or it cannot be read as a pid record)."""
    record = _read_record(Path(run_dir) / LAUNCH_PID)
    if record is None or not isinstance(record.get("pid"), int) or not isinstance(record.get("pgid"), int):
        return None
    return record


def is_alive(record: dict[str, Any]) -> bool:
    """The recorded supervisor still runs: same pid and same start time."""
    ticks = proc_start_ticks(int(record["pid"]))
    return ticks is not None and ticks == record.get("start_time_ticks")


def read_exit(run_dir: Path, record: dict[str, Any]) -> dict[str, Any] | None:
    """RUN_DIR/launch.exit.json when it was written by the launch `record` describes."""
    ended = _read_record(Path(run_dir) / LAUNCH_EXIT)
    if ended is None or ended.get("pid") != record.get("pid"):
        return None
    if ended.get("start_time_ticks") != record.get("start_time_ticks"):
        return None
    return ended


def _ancestors() -> set[int]:
    """This process and the processes above it (a launch never counts itself or its supervisor)."""
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
            pid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _trains(words: list[str], cwd: Path, run_dir: Path) -> bool:
    """Whether a command line trains `run_dir`: `finetune launch RUN_DIR`, `accelerate launch ... -m
    llm_finetuning.launch.worker RUN_DIR`, the detached supervisor, or `bash RUN_DIR/launch.sh`."""
    named = [(cwd / w).resolve() for w in words[1:] if w and not w.startswith("-")]
    if Path(words[0]).name in ("bash", "sh") and len(named) >= 1:
        return named[0] == run_dir / LAUNCH_SCRIPT
    return run_dir in named and any(w == "launch" or w.endswith(_LAUNCH_MODULES) for w in words)


def launch_processes(run_dir: Path, exclude: set[int] | None = None) -> list[int]:
    """Pids of live processes training `run_dir`, detached or not (see `_trains`), so `finetune status`
    also sees a run launched in the foreground. This process and its ancestors never count."""
    run_dir = Path(run_dir).resolve()
    skip = exclude if exclude is not None else _ancestors()
    found: list[int] = []
    if not os.path.isdir("/proc"):
        return found
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        pid = int(entry.name)
        try:
            words = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace").split("\0")
            cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            continue
        if words and words[0] and _trains(words, cwd, run_dir) and proc_start_ticks(pid) is not None:
            found.append(pid)
    return sorted(found)


def live_run(run_dir: Path) -> int | None:
    """The pid of a run training in `run_dir` now (detached or in the foreground), None when none is;
    this process and its ancestors never count."""
    record = read_launch(run_dir)
    if record is not None and is_alive(record) and int(record["pgid"]) != os.getpgrp():
        return int(record["pid"])
    pids = launch_processes(run_dir)
    return pids[0] if pids else None


def detached_run_ended(run_dir: Path) -> bool:
    """A detached launch is recorded in RUN_DIR and its supervisor is gone (finished, stopped or failed).
    False when there is none: a run launched otherwise may still be starting."""
    record = read_launch(run_dir)
    return record is not None and not is_alive(record)


def forget_stale_launch(run_dir: Path) -> None:
    """Before a launch in the foreground: drop the records of an earlier detached launch (which has ended,
    as the caller checked), so `finetune status` judges this run by its own processes and metrics. Kept
    when this process is that launch's own child (the supervisor runs the plain launch)."""
    record = read_launch(run_dir)
    if record is not None and int(record["pgid"]) == os.getpgrp():
        return
    for name in (LAUNCH_PID, LAUNCH_EXIT):
        (Path(run_dir) / name).unlink(missing_ok=True)


def detach_problem(run_dir: Path, resume: bool) -> Problem | None:
    """What the detached launch would be refused for once in the background, asked here so the refusal
    comes at once: the checkpoints (`start_problem`, the check training itself makes)."""
    return start_problem(_rendered_config(Path(run_dir).resolve())[1], resume)


def start_detached(run_dir: Path, resume: bool) -> dict[str, Any]:
    """Start `finetune launch RUN_DIR [--resume]` under a supervisor in its own session; write launch.pid
    and return it. The caller has verified the run and checked that nothing runs there."""
    run_dir = Path(run_dir).resolve()
    command = [sys.executable, "-I", "-m", "llm_finetuning.cli", "launch", str(run_dir), *(["--resume"] if resume else [])]
    log_path = run_dir / LAUNCH_LOG
    (run_dir / LAUNCH_EXIT).unlink(missing_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log_path, "ab") as log:
        log.write(f"\n{_LOG_HEADER} {utc_now()}: {shlex.join(command)}\n".encode())
        log.flush()
        proc = subprocess.Popen([sys.executable, "-I", "-m", "llm_finetuning.launch.detach", str(run_dir), "--", *command],
                                cwd=run_dir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    record = {
        "format": PID_FORMAT,
        "pid": proc.pid,
        "pgid": proc.pid,  # a new session: the supervisor leads its own process group
        "start_time_ticks": proc_start_ticks(proc.pid),
        "started_at": utc_now(),
        "command": shlex.join(command),
        "resume": resume,
        "log": str(log_path),
    }
    atomic_write_json(run_dir / LAUNCH_PID, record)
    return record


class NothingRuns(UnusableInput):
    """`finetune stop` found no detached run in RUN_DIR; the message says what it found instead."""


SIGNALLED, ALREADY_ASKED, ENDED = "signalled", "already_asked", "ended"


def request_stop(run_dir: Path) -> tuple[dict[str, Any], str]:
    """SIGTERM to the detached run's process group, recorded in launch.pid first (so `finetune status`
    says stopped, not failed). Returns the pid record and what happened: SIGNALLED, ALREADY_ASKED (a stop
    is under way: a second SIGTERM would end the trainer at once, without its checkpoint) or ENDED."""
    run_dir = Path(run_dir)
    record = read_launch(run_dir)
    if record is None:
        pids = launch_processes(run_dir)
        if pids:
            raise NothingRuns(f"{run_dir} was launched in the foreground (pid {pids[0]}), not with --detach",
                              f"stop it with Ctrl-C in its terminal or `kill -TERM {pids[0]}` (it checkpoints first)")
        raise NothingRuns(f"nothing runs in {run_dir}: there is no {LAUNCH_PID} (it was never launched with "
                          "--detach).", f"start it with `finetune launch {run_dir} --detach`")
    if not is_alive(record):
        return record, ENDED
    if record.get("stop_requested_at"):
        return record, ALREADY_ASKED
    record = {**record, "stop_requested_at": utc_now(), "stop_signal": "SIGTERM"}
    atomic_write_json(run_dir / LAUNCH_PID, record)
    try:
        os.killpg(int(record["pgid"]), signal.SIGTERM)
    except ProcessLookupError:
        return record, ENDED
    return record, SIGNALLED


def wait_for_exit(run_dir: Path, record: dict[str, Any], timeout: float, poll: float = 0.2) -> bool:
    """Wait until the recorded supervisor and every process of the run are gone (the run checkpointed and
    exited); False on timeout."""
    deadline = time.monotonic() + timeout
    while is_alive(record) or launch_processes(run_dir):
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
    return True


def _rendered_config(run_dir: Path) -> tuple[int | None, Path]:
    """max_steps and the checkpoint folder (output_dir) from the rendered grpo_config.yaml."""
    import yaml

    try:
        config = yaml.safe_load((run_dir / GRPO_CONFIG).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        config = None
    config = config if isinstance(config, dict) else {}
    max_steps = config.get("max_steps")
    output_dir = config.get("output_dir")
    return (max_steps if isinstance(max_steps, int) and not isinstance(max_steps, bool) else None,
            run_dir / (output_dir if isinstance(output_dir, str) else CHECKPOINTS))


def _progress(traj: Any, max_steps: int | None) -> dict[str, Any]:
    """Step, last reward, training seconds and seconds per step from metrics.jsonl's `elapsed_s`, which
    restarts at each launch (a resumed run starts a new segment)."""
    steps: list[int] = traj.steps
    elapsed = [row.get("elapsed_s") for row in traj.rows]
    reward = next((row["reward"] for row in reversed(traj.rows) if row.get("reward") is not None), None)
    total, per_step = None, None
    if steps and all(isinstance(e, (int, float)) for e in elapsed):
        total, seg_start = 0.0, 0
        for i in range(1, len(elapsed)):
            if elapsed[i] < elapsed[i - 1]:  # a new launch (resume): its clock restarted
                total += elapsed[i - 1]
                seg_start = steps[i - 1]
        total += elapsed[-1]
        if steps[-1] > seg_start:
            per_step = elapsed[-1] / (steps[-1] - seg_start)
    eta = None
    if per_step is not None and max_steps is not None:
        eta = round(per_step * max(max_steps - traj.last_step, 0), 1)
    return {"step": traj.last_step, "reward": reward, "elapsed_s": None if total is None else round(total, 1),
            "eta_s": eta}


def _finding(run_dir: Path, traj: Any) -> dict[str, Any] | None:
    """The most serious diagnose finding now, or None when healthy (the rules need a few steps first)."""
    from llm_finetuning.diagnose import diagnose, failure_modes, load_context

    try:
        ctx = load_context(run_dir)
    except UnusableInput:
        return None
    findings = failure_modes(diagnose(traj, ctx))  # an info finding (converged) is no failure to report
    if not findings:
        return None
    f = findings[0]
    return {"id": f.id, "severity": f.severity, "message": f.evidence.get("message", ""), "variant": f.variant,
            "fix": f.fix}


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last lines the latest launch wrote to its log; of a progress bar's redraws (carriage returns)
    only the last one of a run of them is kept."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(fh.tell() - 65536, 0))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    start = text.rfind(_LOG_HEADER)
    if start >= 0:
        text = text[start:]
    kept: list[str] = []
    for part in (p.rstrip() for chunk in text.split("\n") for p in chunk.split("\r")):
        if not part.strip():
            continue
        bar = part.split("|", 1)[0].rsplit(":", 1)[0] if "|" in part else None
        if bar and kept and "|" in kept[-1] and kept[-1].startswith(bar + ":"):
            kept[-1] = part  # the same progress bar, redrawn
        else:
            kept.append(part)
    return kept[-lines:]


def _state(run_dir: Path, record: dict[str, Any] | None, traj: Any, live: list[int],
           ckpt: Path | None) -> tuple[RunState, dict[str, Any]]:
    """The state and the facts that decided it (pid, exit record)."""
    facts: dict[str, Any] = {"pid": None, "exit": None}
    if record is not None:
        facts["pid"] = int(record["pid"])
        if is_alive(record):
            return RunState.RUNNING, facts
        facts["exit"] = read_exit(run_dir, record)
    if live:
        facts["pid"] = live[0]
        return RunState.RUNNING, facts
    if record is not None:
        if facts["exit"] is not None and facts["exit"].get("exit_code") == 0:
            return RunState.FINISHED, facts
        return (RunState.STOPPED if record.get("stop_requested_at") else RunState.FAILED), facts
    # Launched in the foreground (or by hand) and no longer running: the metrics tell how it ended.
    if traj is None:
        return RunState.NOT_STARTED, facts
    if traj.ended:
        return RunState.FINISHED, facts
    if ckpt is not None and int(ckpt.name.rsplit("-", 1)[1]) >= traj.last_step:
        return RunState.STOPPED, facts  # a signalled run checkpoints at the step it stops on
    return RunState.FAILED, facts


def run_status(run_dir: Path) -> dict[str, Any]:
    """The `finetune status --json` object (docs/render-launch.md): state, step, max_steps, reward, elapsed_s, eta_s,
    pid, log, finding; plus exit_code, signal, checkpoint, log_tail and next. Raises UnusableInput when
    RUN_DIR is not a rendered run directory."""
    from llm_finetuning.diagnose import load_trajectory

    load_manifest(Path(run_dir))
    run_dir = Path(run_dir).resolve()
    max_steps, output_dir = _rendered_config(run_dir)
    ckpt = last_complete_checkpoint(output_dir)
    record = read_launch(run_dir)
    try:
        traj = load_trajectory(run_dir)
    except UnusableInput:
        traj = None
    live = [] if record is not None and is_alive(record) else launch_processes(run_dir)
    state, facts = _state(run_dir, record, traj, live, ckpt)
    progress: dict[str, Any] = {"step": 0, "reward": None, "elapsed_s": None, "eta_s": None}
    if traj is not None:
        progress = _progress(traj, max_steps)
    if state == RunState.FINISHED:
        progress["eta_s"] = 0.0
    elif state != RunState.RUNNING:
        progress["eta_s"] = None
    log = run_dir / LAUNCH_LOG
    ended = facts["exit"] or {}
    out: dict[str, Any] = {
        "state": state,
        "step": progress["step"],
        "max_steps": max_steps,
        "reward": progress["reward"],
        "elapsed_s": progress["elapsed_s"],
        "eta_s": progress["eta_s"],
        "pid": facts["pid"],
        "log": str(log) if log.is_file() else None,
        "finding": _finding(run_dir, traj) if traj is not None else None,
        "exit_code": ended.get("exit_code"),
        "signal": ended.get("signal"),
        "checkpoint": str(ckpt) if ckpt is not None else None,
        "log_tail": log_tail(log) if state == RunState.FAILED else [],
        "next": _next_commands(run_dir, state, ckpt is not None),
    }
    return out


def _next_commands(run_dir: Path, state: RunState, has_checkpoint: bool) -> list[str]:
    q = shlex.quote(str(run_dir))
    if state == RunState.RUNNING:
        return [f"finetune diagnose {q} --follow --timeout 240", f"finetune status {q}", f"finetune stop {q}"]
    if state == RunState.NOT_STARTED:
        return [f"finetune launch {q} --detach"]
    if state in (RunState.STOPPED, RunState.FAILED) and has_checkpoint:
        return [f"finetune launch {q} --detach --resume"]
    if state == RunState.FINISHED:
        return [f"finetune diagnose {q}"]
    return [f"finetune launch {q} --detach"]


def supervise(run_dir: Path, command: list[str]) -> int:
    """Run `command` (the plain launch) and write launch.exit.json when it ends, however it ends.

    SIGTERM, SIGINT and SIGHUP reach the whole process group; the supervisor notes them and keeps waiting
    while the trainer checkpoints and exits. A Python handler rather than SIG_IGN, which the child would
    inherit through exec."""
    received: list[str] = []

    def note(signum: int, frame: Any) -> None:
        received.append(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, note)
    me = os.getpid()
    child_pid = None
    try:
        child = subprocess.Popen(command, cwd=run_dir, stdin=subprocess.DEVNULL)
        child_pid = child.pid
        code = child.wait()
        # launch.sh runs its processes in a session of their own, and a signal can end the shell before its
        # workers have saved their checkpoint: the run has ended when none of its processes is left.
        while launch_processes(run_dir):
            time.sleep(1.0)
    except OSError as exc:
        print(f"finetune launch --detach: cannot start {shlex.join(command)}: {exc}", file=sys.stderr, flush=True)
        code = 127
    ended = {
        "format": PID_FORMAT,
        "pid": me,
        "start_time_ticks": proc_start_ticks(me),
        "child_pid": child_pid,
        "exit_code": code if code >= 0 else None,
        "signal": signal.Signals(-code).name if code < 0 else None,
        "signals_received": received,
        "ended_at": utc_now(),
    }
    atomic_write_json(Path(run_dir) / LAUNCH_EXIT, ended)
    how = f"exit code {code}" if code >= 0 else f"signal {ended['signal']}"
    print(f"\n=== {ended['ended_at']} the detached run ended ({how})", flush=True)
    return 0 if code == 0 else 1


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m llm_finetuning.launch.detach RUN_DIR -- COMMAND...", file=sys.stderr)
        return 2
    return supervise(Path(args[0]), args[2:])


if __name__ == "__main__":
    sys.exit(main())
