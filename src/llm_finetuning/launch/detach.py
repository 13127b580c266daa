"""Runs that outlive the caller's shell: `finetune launch --detach`, `finetune status`, `finetune stop`.

An agent's shell stops a command after a few minutes; a training run takes longer. `finetune launch
--detach` verifies the run in the foreground, then starts a supervisor in its own session
(`python -m llm_finetuning.launch.detach RUN_DIR -- CMD...`, stdin /dev/null) and returns. The supervisor
runs CMD (the plain `finetune launch RUN_DIR [--resume]`, which verifies again and trains in process or
through launch.sh) in the session's process group, so one SIGTERM to the group from `finetune stop`
reaches the trainer; it waits for the run and records how it ended. Whether a run trains is the run's own
lock (`launch.runlock`), never a pid: the launching command takes it, hands it to the supervisor, which hands
it to CMD, so a second launch is refused without touching the first, and `status`, `stop` and a second launch
answer the same from any pid namespace. Files in RUN_DIR:

- `launch.pid`: JSON written atomically by the launcher: `launch_id`, `pid` and `pgid` of the supervisor
  (meaningful in `pid_namespace` only), `started_at`, `command`, `resume`, `log`; `finetune stop` adds
  `stop_requested_at` and `stop_signal` (null when the stop went by stop.request alone).
- `launch.log`: stdout and stderr of every detached launch, appended.
- `launch.exit.json`: written atomically by the supervisor when the run ends, also when it fails:
  `launch_id`, `exit_code` (null when a signal ended it), `signal`, `ended_at`.

The state `finetune status` reports comes from the lock, these files and metrics.jsonl. A run launched in
the foreground has no pid file: the lock says it runs, and the end marker in metrics.jsonl how it ended.
Light: the standard library, the records' atomic writer and the diagnose rules; no ML library.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NamedTuple, TypedDict

from llm_finetuning.errors import Problem, TextEnum, UnusableInput
from llm_finetuning.fileio import atomic_write_json, read_json_object, utc_now
from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.launch import runlock
from llm_finetuning.rundir import CHECKPOINTS, GRPO_CONFIG, LAUNCH_EXIT, LAUNCH_LOG, LAUNCH_PID, STOP_REQUEST
from llm_finetuning.rundir.checkpoints import last_complete_checkpoint, start_problem
from llm_finetuning.rundir.manifest import load_manifest

if TYPE_CHECKING:
    from llm_finetuning.diagnose import Trajectory

PID_FORMAT = 2  # 2: launch_id and pid_namespace; the run's lock, not the process table, says it runs
_ENV_LAUNCH_ID = "LLM_FINETUNING_LAUNCH_ID"  # the supervisor's launch id, written into launch.exit.json



class RunState(TextEnum):
    """What `finetune status` says of a run (docs/render-launch.md): training now, reached its last step,
    ended otherwise, ended after `finetune stop` (or a signal it checkpointed on), or never launched."""

    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"
    NOT_STARTED = "not_started"


class FindingSummary(TypedDict):
    """The most serious diagnose finding, as `finetune status` shows it."""

    id: str
    severity: str
    message: str
    variant: str | None
    fix: str


class RunProgress(TypedDict):
    """How far a run got, from metrics.jsonl."""

    step: int
    reward: float | None
    elapsed_s: float | None
    eta_s: float | None


class RunStatus(TypedDict):
    """The `finetune status --json` object (docs/render-launch.md). `exit_code` and `signal` are launch.exit.json's
    values as written."""

    state: RunState
    step: int
    max_steps: int | None
    reward: float | None
    elapsed_s: float | None
    eta_s: float | None
    pid: int | None
    log: str | None
    finding: FindingSummary | None
    exit_code: JsonValue
    signal: JsonValue
    checkpoint: str | None
    log_tail: list[str]
    next: list[str]


class StateFacts(NamedTuple):
    """What decided a run's state: the pid of the launch, and launch.exit.json when this launch wrote it."""

    pid: int | None
    exit: JsonObject | None


LOG_TAIL_LINES = 15
_LOG_HEADER = "=== finetune launch --detach"  # starts each launch's part of launch.log


def _read_record(path: Path) -> JsonObject | None:
    """A JSON object from launch.pid or launch.exit.json; None when absent or unreadable."""
    try:
        return read_json_object(path, "launch record")
    except UnusableInput:
        return None


def read_launch(run_dir: Path) -> JsonObject | None:
    """RUN_DIR/launch.pid, or None when there is none (or it cannot be read as a pid record)."""
    record = _read_record(Path(run_dir) / LAUNCH_PID)
    if record is None or not isinstance(record.get("pid"), int) or not isinstance(record.get("pgid"), int):
        return None
    return record


def read_exit(run_dir: Path, record: JsonObject) -> JsonObject | None:
    """RUN_DIR/launch.exit.json when it was written by the launch `record` describes (same launch_id)."""
    ended = _read_record(Path(run_dir) / LAUNCH_EXIT)
    if ended is None or ended.get("launch_id") is None or ended.get("launch_id") != record.get("launch_id"):
        return None
    return ended


def _pid_namespace() -> str | None:
    """This process's pid namespace (`pid:[inode]`), None where /proc cannot say."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def live_run(run_dir: Path) -> JsonObject | None:
    """What the launch training in `run_dir` now says of itself (`runlock.holder`: pid, started_at, command),
    None when none holds the run's lock. The same answer from any pid namespace."""
    if not runlock.is_held(run_dir):
        return None
    return runlock.holder(run_dir)


def detached_run_ended(run_dir: Path) -> bool:
    """A detached launch is recorded in RUN_DIR and no launch holds the run's lock (finished, stopped or failed).
    False when there is none: a run launched otherwise may still be starting."""
    return read_launch(run_dir) is not None and not runlock.is_held(run_dir)


def forget_stale_launch(run_dir: Path) -> None:
    """Before a new launch, with the run's lock just taken: drop an earlier launch's pid record, exit record and
    stop request, so `finetune status` judges this run by its own files."""
    for name in (LAUNCH_PID, LAUNCH_EXIT, STOP_REQUEST):
        (Path(run_dir) / name).unlink(missing_ok=True)


def detach_problem(run_dir: Path, resume: bool) -> Problem | None:
    """What the detached launch would be refused for once in the background, asked here so the refusal
    comes at once: the checkpoints (`start_problem`, the check training itself makes)."""
    return start_problem(_rendered_config(Path(run_dir).resolve())[1], resume)


def start_detached(run_dir: Path, resume: bool, lock: runlock.RunLock) -> JsonObject:
    """Start `finetune launch RUN_DIR [--resume]` under a supervisor in its own session, handing it the run's
    `lock` (taken by the caller, which has verified the run); write launch.pid and return it."""
    run_dir = Path(run_dir).resolve()
    command = [sys.executable, "-I", "-m", "llm_finetuning.cli", "launch", str(run_dir), *(["--resume"] if resume else [])]
    log_path = run_dir / LAUNCH_LOG
    forget_stale_launch(run_dir)
    launch_id = uuid.uuid4().hex
    env = lock.child_env(dict(os.environ, PYTHONUNBUFFERED="1", **{_ENV_LAUNCH_ID: launch_id}))
    with open(log_path, "ab") as log:
        log.write(f"\n{_LOG_HEADER} {utc_now()}: {shlex.join(command)}\n".encode())
        log.flush()
        proc = subprocess.Popen([sys.executable, "-I", "-m", "llm_finetuning.launch.detach", str(run_dir), "--", *command],
                                cwd=run_dir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, pass_fds=(lock.fd,))
    lock.describe(proc.pid, shlex.join(command))
    record: JsonObject = {
        "format": PID_FORMAT,
        "launch_id": launch_id,
        "pid": proc.pid,
        "pgid": proc.pid,  # a new session: the supervisor leads its own process group
        "pid_namespace": _pid_namespace(),
        "started_at": utc_now(),
        "command": shlex.join(command),
        "resume": resume,
        "log": str(log_path),
    }
    atomic_write_json(run_dir / LAUNCH_PID, record)
    lock.release()  # the supervisor and the launch it runs hold it from here
    return record


class NothingRuns(UnusableInput):
    """`finetune stop` found no detached run in RUN_DIR; the message says what it found instead."""


SIGNALLED, ALREADY_ASKED, ENDED = "signalled", "already_asked", "ended"


def request_stop(run_dir: Path) -> tuple[JsonObject, str]:
    """Ask the detached run to checkpoint and stop: the request is recorded in launch.pid (so `finetune status`
    says stopped, not failed) and in RUN_DIR/stop.request, which the trainer reads at the end of each step, so
    it reaches the run from any pid namespace; from the run's own namespace SIGTERM also goes to its process
    group (it stops a run still loading its model). Returns the pid record and what happened: SIGNALLED,
    ALREADY_ASKED (a stop is under way: a second SIGTERM would end the trainer at once, without its checkpoint)
    or ENDED."""
    run_dir = Path(run_dir)
    record = read_launch(run_dir)
    running = live_run(run_dir)
    if record is None:
        if running is not None:
            pid = running.get("pid", "unknown")
            raise NothingRuns(f"{run_dir} was launched in the foreground (pid {pid}), not with --detach",
                              f"stop it with Ctrl-C in its terminal or `kill -TERM {pid}` (it checkpoints first)")
        raise NothingRuns(f"nothing runs in {run_dir}: there is no {LAUNCH_PID} (it was never launched with "
                          "--detach).", f"start it with `finetune launch {run_dir} --detach`")
    if running is None:
        return record, ENDED
    if record.get("stop_requested_at"):
        return record, ALREADY_ASKED
    record = {**record, "stop_requested_at": utc_now(), "stop_signal": "SIGTERM"}
    atomic_write_json(run_dir / LAUNCH_PID, record)
    atomic_write_json(run_dir / STOP_REQUEST, {"requested_at": record["stop_requested_at"]})
    pgid = record["pgid"]
    assert isinstance(pgid, int)  # read_launch accepts only a record with an integer pgid
    if record.get("pid_namespace") is not None and record.get("pid_namespace") == _pid_namespace():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    else:
        record["stop_signal"] = None  # the request file alone reaches it
        atomic_write_json(run_dir / LAUNCH_PID, record)
    return record, SIGNALLED


def wait_for_exit(run_dir: Path, timeout: float, poll: float = 0.2) -> bool:
    """Wait until no launch holds the run's lock (the run checkpointed and every process of it exited); False
    on timeout."""
    deadline = time.monotonic() + timeout
    while runlock.is_held(run_dir):
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


def _progress(traj: Trajectory, max_steps: int | None) -> RunProgress:
    """Step, last reward, training seconds and seconds per step from metrics.jsonl's `elapsed_s`, which
    restarts at each launch (a resumed run starts a new segment)."""
    steps: list[int] = traj.steps
    logged = [row.get("elapsed_s") for row in traj.rows]
    elapsed = [e for e in logged if isinstance(e, (int, float))]
    reward = next((row["reward"] for row in reversed(traj.rows) if row.get("reward") is not None), None)
    total, per_step = None, None
    if steps and len(elapsed) == len(logged):
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


def _finding(run_dir: Path, traj: Trajectory) -> FindingSummary | None:
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
    return {"id": f.id, "severity": f.severity, "message": str(f.evidence.get("message", "")), "variant": f.variant,
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


def _state(run_dir: Path, record: JsonObject | None, traj: Trajectory | None, running: JsonObject | None,
           ckpt: Path | None) -> tuple[RunState, StateFacts]:
    """The state and the facts that decided it (pid, exit record)."""
    recorded_pid = record["pid"] if record is not None else None
    pid = recorded_pid if isinstance(recorded_pid, int) else None  # read_launch accepts only an integer pid
    facts = StateFacts(pid, None)
    if running is not None:
        running_pid = running.get("pid")
        if record is None and isinstance(running_pid, int):
            facts = StateFacts(running_pid, None)
        return RunState.RUNNING, facts
    if record is not None:
        facts = StateFacts(pid, read_exit(run_dir, record))
        if facts.exit is not None and facts.exit.get("exit_code") == 0:
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


def run_status(run_dir: Path) -> RunStatus:
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
    state, facts = _state(run_dir, record, traj, live_run(run_dir), ckpt)
    progress: RunProgress = {"step": 0, "reward": None, "elapsed_s": None, "eta_s": None}
    if traj is not None:
        progress = _progress(traj, max_steps)
    if state == RunState.FINISHED:
        progress["eta_s"] = 0.0
    elif state != RunState.RUNNING:
        progress["eta_s"] = None
    log = run_dir / LAUNCH_LOG
    ended = facts.exit or {}
    out: RunStatus = {
        "state": state,
        "step": progress["step"],
        "max_steps": max_steps,
        "reward": progress["reward"],
        "elapsed_s": progress["elapsed_s"],
        "eta_s": progress["eta_s"],
        "pid": facts.pid,
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

    The run's lock, handed down by the launching command, goes on to `command` and is held here until the exit
    record is written. SIGTERM, SIGINT and SIGHUP reach the whole process group; the supervisor notes them and
    keeps waiting while the trainer checkpoints and exits. A Python handler rather than SIG_IGN, which the
    child would inherit through exec."""
    received: list[str] = []

    def note(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, note)
    lock = runlock.claim(run_dir)
    if lock is None:  # never handed down: a supervisor started by hand while a launch trains here
        print(f"finetune launch --detach: {run_dir} is already training", file=sys.stderr, flush=True)
        return 1
    child_pid = None
    try:
        child = subprocess.Popen(command, cwd=run_dir, stdin=subprocess.DEVNULL, env=lock.child_env(dict(os.environ)),
                                 pass_fds=(lock.fd,))
        child_pid = child.pid
        code = child.wait()
    except OSError as exc:
        print(f"finetune launch --detach: cannot start {shlex.join(command)}: {exc}", file=sys.stderr, flush=True)
        code = 127
    ended: dict[str, object] = {
        "format": PID_FORMAT,
        "launch_id": os.environ.get(_ENV_LAUNCH_ID),
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
