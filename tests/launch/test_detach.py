"""`finetune launch --detach`, `finetune status` and `finetune stop` through the real CLI in child processes,
training the tiny model on CPU: a detached run outlives the shell that started it, stops at a checkpoint
and resumes, and a killed worker is reported failed with its log. The quick tests need no training."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from launch_cases import (
    child_env,
    cli,
    copy_model,
    finetune,
    make_brief,
    metric_steps,
    run_status,
    wait_until,
)

from llm_finetuning.rundir import LAUNCH_EXIT, LAUNCH_LOG, LAUNCH_PID

STATUS_KEYS = {"state", "step", "max_steps", "reward", "elapsed_s", "eta_s", "pid", "log", "finding"}


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_model(tiny_model_dir, tmp_path_factory.mktemp("m") / "tiny")


def _rendered(tmp_path: Path, model: Path, max_steps: int, save_steps: int = 50) -> Path:
    brief = make_brief(tmp_path / "b", model, max_steps=max_steps, save_steps=save_steps)
    run = tmp_path / "run"
    out = finetune("render", str(brief), "-o", str(run))
    assert out.returncode == 0, out.stdout + out.stderr
    return run


def _detach(run: Path, *extra: str) -> int:
    """`finetune launch RUN --detach`: exit 0 and the pid it printed, which launch.pid holds too."""
    out = cli("launch", str(run), "--detach", *extra)
    assert out.returncode == 0, out.stdout + out.stderr
    pid = json.loads((run / LAUNCH_PID).read_text())["pid"]
    assert f"pid {pid}" in out.stdout and str(run / LAUNCH_LOG) in out.stdout
    assert f"finetune stop {run}" in out.stdout and f"finetune diagnose {run} --follow --timeout 240" in out.stdout
    return int(pid)


def _ended(run: Path) -> bool:
    return (run / LAUNCH_EXIT).is_file()


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_status_of_a_run_never_launched(tmp_path: Path, model: Path) -> None:
    run = _rendered(tmp_path, model, max_steps=4)
    status = run_status(run)
    assert set(status) >= STATUS_KEYS
    assert (status["state"], status["step"], status["max_steps"], status["rc"]) == ("not_started", 0, 4, 0)
    assert status["pid"] is None and status["finding"] is None and status["eta_s"] is None
    human = cli("status", str(run))
    assert human.returncode == 0 and human.stdout.startswith(f"{run}: not_started, step 0 of 4")
    assert f"finetune launch {run} --detach" in human.stdout
    stop = cli("stop", str(run))
    assert stop.returncode == 2 and "nothing runs in" in stop.stderr and "no launch.pid" in stop.stderr


def test_status_of_a_folder_that_is_no_run(tmp_path: Path) -> None:
    out = cli("status", str(tmp_path), "--json")
    assert out.returncode == 2
    assert "manifest.json does not exist" in json.loads(out.stdout)["problems"][0]["message"]
    assert cli("stop", str(tmp_path / "absent")).returncode == 2


def test_status_imports_no_ml_library(tmp_path: Path, model: Path) -> None:
    run = _rendered(tmp_path, model, max_steps=4)
    code = ("import sys; from llm_finetuning.cli import cli\n"
            "try:\n    cli(['status', sys.argv[1], '--json'], prog_name='finetune')\n"
            "except SystemExit:\n    pass\n"
            "print([m for m in ('torch', 'transformers', 'trl', 'numpy', 'datasets') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True, env=child_env())
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stderr


def test_a_refused_run_is_refused_the_same_way_detached(tmp_path: Path, model: Path) -> None:
    run = _rendered(tmp_path, model, max_steps=4)
    cfg = run / "grpo_config.yaml"
    cfg.write_text(cfg.read_text().replace("learning_rate: 5.0e-07", "learning_rate: 1.0e-05"))
    plain, detached = cli("launch", str(run)), cli("launch", str(run), "--detach")
    assert detached.returncode == plain.returncode == 1
    assert detached.stderr == plain.stderr and "grpo_config.yaml: was edited after rendering" in detached.stderr
    assert not (run / LAUNCH_PID).exists() and not (run / LAUNCH_LOG).exists()


def test_detach_refuses_at_once_what_training_would_refuse(tmp_path: Path, model: Path) -> None:
    run = _rendered(tmp_path, model, max_steps=4)
    out = cli("launch", str(run), "--detach", "--resume")
    assert out.returncode == 1 and "--resume: no complete checkpoint in" in out.stderr, out.stderr
    (run / "checkpoints" / "checkpoint-2").mkdir(parents=True)  # what a killed launch leaves
    out = cli("launch", str(run), "--detach")
    assert out.returncode == 1 and "already holds checkpoints of an earlier launch" in out.stderr, out.stderr
    assert not (run / LAUNCH_PID).exists()


def test_the_runs_lock_decides_from_any_pid_namespace(tmp_path: Path, model: Path) -> None:
    """A process holding RUN_DIR's lock, as a launch does for its whole life, is the run, whoever asks and from
    whatever pid namespace; once it is killed (SIGKILL: no clean-up) the lock is gone with it."""
    run = _rendered(tmp_path, model, max_steps=4)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import os, sys, time; from llm_finetuning.launch.runlock import claim\n"
         "lock = claim(sys.argv[1]); lock.describe(os.getpid(), 'held by the test'); print('held', flush=True)\n"
         "time.sleep(600)", str(run)], stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        seen = _in_another_pid_namespace("status", str(run), "--json")
        assert (json.loads(seen.stdout)["state"], json.loads(seen.stdout)["pid"]) == ("running", holder.pid), seen.stderr
        for launch in (cli("launch", str(run), "--detach"), _in_another_pid_namespace("launch", str(run), "--detach")):
            assert launch.returncode == 1 and f"already training (pid {holder.pid})" in launch.stderr, launch.stderr
        assert not (run / LAUNCH_PID).exists() and not (run / LAUNCH_LOG).exists()
    finally:
        holder.kill()
        holder.wait()
    assert json.loads(_in_another_pid_namespace("status", str(run), "--json").stdout)["state"] == "not_started"


def test_a_worker_started_by_hand_is_refused_while_a_launch_holds_the_lock(tmp_path: Path, model: Path) -> None:
    """`accelerate launch -m llm_finetuning.launch.worker RUN_DIR` (or launch.sh) by hand: rank 0 asks the lock."""
    run = _rendered(tmp_path, model, max_steps=4)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from llm_finetuning.launch.runlock import claim\n"
         "lock = claim(sys.argv[1]); print('held', flush=True); time.sleep(600)", str(run)],
        stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        worker = subprocess.run([sys.executable, "-m", "llm_finetuning.launch.worker", str(run)], capture_output=True,
                                text=True, env=child_env(), timeout=300)
        assert worker.returncode == 1 and f"{run.resolve()} is already training" in worker.stderr, worker.stderr
        assert not (run / "metrics.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_detached_run_outlives_the_shell_that_started_it(tmp_path: Path, model: Path) -> None:
    run = _rendered(tmp_path, model, max_steps=4, save_steps=2)
    log = run / LAUNCH_LOG
    returned = tmp_path / "returned"
    # An agent's shell: it runs the detached launch, then lingers until killed with its whole process group.
    shell = subprocess.Popen(
        ["bash", "-c", f'{sys.executable} -m llm_finetuning.cli launch {run} --detach > {tmp_path / "out"} 2>&1; '
         f'echo $? > {returned}; exec sleep 600'],
        env=child_env(), start_new_session=True)
    try:
        wait_until(returned.is_file, 120, "the detached launch to return", tmp_path / "out")
        assert returned.read_text().strip() == "0", (tmp_path / "out").read_text()
        status = run_status(run)
        assert status["state"] == "running" and status["rc"] == 0, status  # returned while the run goes on
        assert status["pid"] == json.loads((run / LAUNCH_PID).read_text())["pid"]
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()

    wait_until(lambda: _ended(run), 600, "the run to end", log)
    status = run_status(run)
    assert (status["state"], status["step"], status["max_steps"], status["rc"]) == ("finished", 4, 4, 0), status
    assert status["eta_s"] == 0 and status["elapsed_s"] > 0 and status["log"] == str(log)
    assert json.loads((run / LAUNCH_EXIT).read_text())["exit_code"] == 0
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1]) == {"event": "end", "step": 4}
    assert (run / "model" / "model.safetensors").is_file()
    assert "trained 4 step(s)" in log.read_text(errors="replace")


@pytest.mark.slow
def test_stop_checkpoints_and_resume_detached_finishes(tmp_path: Path, model: Path) -> None:
    run = _rendered(tmp_path, model, max_steps=24)  # long enough that the stop lands mid-run on a loaded machine
    log = run / LAUNCH_LOG
    first = _detach(run)
    wait_until(lambda: bool(metric_steps(run)) or _ended(run), 300, "the first logged step", log)
    stop = cli("stop", str(run))
    assert stop.returncode == 0 and f"sent SIGTERM to pid {first}" in stop.stdout, stop.stderr
    again = cli("stop", str(run), "--wait", "240", timeout=300)  # not a second SIGTERM, which skips the checkpoint
    assert again.returncode == 0, again.stderr
    assert "a stop was asked" in again.stdout or "has already ended" in again.stdout, again.stdout

    status = run_status(run)
    assert (status["state"], status["exit_code"], status["signal"], status["rc"]) == ("stopped", 1, None, 1), status
    assert "stopped by SIGTERM" in (run / LAUNCH_LOG).read_text(errors="replace")
    checkpoint = Path(status["checkpoint"])
    assert (checkpoint / "COMPLETE").is_file() and 1 <= status["step"] < 24
    assert json.loads((checkpoint / "trainer_state.json").read_text())["global_step"] == status["step"]
    assert f"finetune launch {run} --detach --resume" in cli("status", str(run)).stdout
    assert cli("stop", str(run)).returncode == 0  # already ended: nothing to signal, not an error

    second = _detach(run, "--resume")
    again = cli("launch", str(run), "--detach", "--resume")
    if not _ended(run):  # a second launch while the first one runs is refused, naming it
        assert again.returncode == 1 and f"already training (pid {second})" in again.stderr, again.stderr
    wait_until(lambda: _ended(run), 600, "the resumed run to end", log)
    status = run_status(run)
    assert (status["state"], status["step"], status["rc"]) == ("finished", 24, 0), status
    assert metric_steps(run) == list(range(1, 25))
    assert (run / "model" / "model.safetensors").is_file()


@pytest.mark.slow
def test_a_refused_launch_leaves_the_running_one_alone(tmp_path: Path, model: Path) -> None:
    """An agent that retries `launch --detach` at once: every retry is refused, touching nothing, and the run that
    was started goes on to its last step."""
    run = _rendered(tmp_path, model, max_steps=6, save_steps=2)
    log = run / LAUNCH_LOG
    first = _detach(run)
    pid_record = (run / LAUNCH_PID).read_bytes()
    for _ in range(3):  # while the first launch verifies, then trains
        again = cli("launch", str(run), "--detach")
        if _ended(run):
            break
        assert again.returncode == 1 and f"already training (pid {first})" in again.stderr, again.stderr
        assert (run / LAUNCH_PID).read_bytes() == pid_record
    wait_until(lambda: _ended(run), 600, "the run to end", log)
    status = run_status(run)
    assert (status["state"], status["step"], status["rc"]) == ("finished", 6, 0), status
    assert "already training" not in log.read_text(errors="replace")


def _in_another_pid_namespace(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`finetune ARGS` in a new user and pid namespace with its own /proc, where no pid of the run is seen."""
    return subprocess.run(["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc",
                           sys.executable, "-m", "llm_finetuning.cli", *args],
                          capture_output=True, text=True, env=child_env(), timeout=timeout)


@pytest.mark.slow
def test_status_stop_and_launch_from_another_pid_namespace(tmp_path: Path, model: Path) -> None:
    """What an agent sees from Claude Code's Bash sandbox: the run's pids mean nothing there, its lock does."""
    # steps enough that the run is still training when the stop arrives, however slowly the three commands
    # before it start on a loaded machine (24 were all done once before the stop was read)
    run = _rendered(tmp_path, model, max_steps=2000, save_steps=5000)
    log = run / LAUNCH_LOG
    first = _detach(run)
    wait_until(lambda: bool(metric_steps(run)) or _ended(run), 300, "the first logged step", log)
    seen = _in_another_pid_namespace("status", str(run), "--json")
    assert json.loads(seen.stdout)["state"] == "running" and seen.returncode == 0, seen.stdout + seen.stderr
    refused = _in_another_pid_namespace("launch", str(run), "--detach")
    assert refused.returncode == 1 and f"already training (pid {first})" in refused.stderr, refused.stderr
    stop = _in_another_pid_namespace("stop", str(run), "--wait", "240", timeout=300)
    assert stop.returncode == 0 and "another pid namespace, so no signal" in stop.stdout, stop.stdout + stop.stderr
    assert "finetune stop: stopped at step" in stop.stdout, stop.stdout
    status = run_status(run)
    assert (status["state"], status["rc"]) == ("stopped", 1), status
    assert "stopped by stop.request" in log.read_text(errors="replace")
    assert Path(status["checkpoint"]).name == f"checkpoint-{status['step']}" and 1 <= status["step"] < 2000


@pytest.mark.slow
def test_a_killed_worker_is_failed_with_its_log(tmp_path: Path, model: Path) -> None:
    run = _rendered(tmp_path, model, max_steps=50)
    log = run / LAUNCH_LOG

    supervisor = _detach(run)  # the worker is killed; its supervisor records how it ended
    wait_until(lambda: bool(metric_steps(run)), 300, "the first logged step", log)
    for worker in _children(supervisor):
        os.kill(worker, signal.SIGKILL)
    wait_until(lambda: _ended(run), 60, "the exit record", log)
    status = run_status(run)
    assert (status["state"], status["signal"], status["exit_code"], status["rc"]) == ("failed", "SIGKILL", None, 1)
    assert status["log_tail"] and status["log_tail"][0].startswith("=== finetune launch --detach")
    human = cli("status", str(run)).stdout
    assert "ended with signal SIGKILL" in human and f"last lines of {log}" in human
    follow = cli("diagnose", str(run), "--follow", "--timeout", "240", "--interval", "0.1", "--no-write", timeout=60)
    assert "stopped following (run ended without its end marker)" in follow.stderr, follow.stderr

    supervisor = _detach(run)  # the whole group is killed: no exit record, the pid is gone
    wait_until(lambda: bool(metric_steps(run)), 300, "the first logged step", log)
    os.killpg(supervisor, signal.SIGKILL)
    wait_until(lambda: run_status(run)["state"] != "running", 30, "the run to be seen dead", log)
    status = run_status(run)
    assert (status["state"], status["signal"], status["rc"]) == ("failed", None, 1), status
    assert not _ended(run) and status["log_tail"]
    assert "ended without an exit record" in cli("status", str(run)).stdout


@pytest.mark.slow
def test_status_of_a_run_launched_in_the_foreground(tmp_path: Path, model: Path) -> None:
    """No pid file: the process is found by its command line, the end by metrics.jsonl's end marker."""
    from launch_cases import start_launch, wait_for

    run = _rendered(tmp_path, model, max_steps=16)  # still training while the CLI children start
    log = tmp_path / "foreground.log"
    proc = start_launch(run, log=log)
    try:
        wait_for(lambda: bool(metric_steps(run)), proc, 300, log)
        status = run_status(run)
        assert (status["state"], status["pid"], status["log"]) == ("running", proc.pid, None), status
        refused = cli("launch", str(run), "--detach")
        assert refused.returncode == 1 and f"already training (pid {proc.pid})" in refused.stderr
        stop = cli("stop", str(run))
        assert stop.returncode == 2 and f"launched in the foreground (pid {proc.pid})" in stop.stderr
        assert proc.wait(timeout=600) == 0, log.read_text(errors="replace")[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    status = run_status(run)
    assert (status["state"], status["step"], status["pid"], status["rc"]) == ("finished", 16, None, 0), status
    assert not (run / LAUNCH_PID).exists()
