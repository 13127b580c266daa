"""`finetune review` at a real pseudo-terminal keeps the seconds spent on each sample, the OS user and the
terminal in the sealed record: a hurried review makes the gate warn, a careful one is timed as it was."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import time
from pathlib import Path

from .conftest import FINETUNE, cli_env, copy_example, make_inspection
from .ptydrive import PtyDriver


def _review(record: Path, tmp_path: Path) -> PtyDriver:
    env = cli_env(USER="ada", LOGNAME="ada", GIT_CONFIG_GLOBAL=str(tmp_path / "no-gitconfig"),
                  GIT_CONFIG_NOSYSTEM="1", TERM="xterm")
    return PtyDriver([*FINETUNE, "review", str(record)], env=env, cwd=str(tmp_path))


def _seconds(sealed: dict) -> list[float]:
    return [sealed["verdicts"][s["id"]]["seconds"] for s in sealed["samples"]]


def _seal_and_read(drive: PtyDriver, record: Path) -> dict:
    """Seal under the offered name; the sealed record, checked for who sealed it and at which terminal."""
    drive.expect(r"\[s\] seal the review")
    drive.send("s")
    drive.expect(r"recorded as the reviewer \[ada\]")
    drive.send("")
    drive.expect(r"No disagreements")
    assert drive.wait() == 0
    sealed = json.loads(record.read_text())
    review = sealed["review"]
    assert review["reviewer"] == "ada"  # the name the person accepted ($USER offered it)
    assert review["os_user"] == pwd.getpwuid(os.getuid()).pw_name != "ada"  # from the uid, not $USER
    assert review["tty"] == drive.tty_name and review["tty"].startswith("/dev/")
    return sealed


def test_a_hurried_review_is_timed_and_the_gate_warns(tmp_path: Path) -> None:
    from llm_finetuning.gate.checks.reward_inspected import MIN_MEDIAN_SECONDS

    brief_path = copy_example("json-person", tmp_path)
    record = make_inspection(brief_path)
    drive = _review(record, tmp_path)
    for i in range(1, 51):
        drive.expect(rf"Sample {i}/50")
        drive.expect(r"> ")
        drive.send("a")
    sealed = _seal_and_read(drive, record)
    seconds = _seconds(sealed)
    assert all(isinstance(s, float) and 0 <= s < MIN_MEDIAN_SECONDS and s == round(s, 1) for s in seconds), seconds
    review = sealed["review"]
    assert review["timed_samples"] == 50
    assert review["total_seconds"] == round(sum(seconds), 1)
    assert review["median_seconds"] < MIN_MEDIAN_SECONDS

    gate = subprocess.run([*FINETUNE, "gate", str(brief_path), "--json"], capture_output=True, text=True,
                          env=cli_env(), cwd=str(tmp_path), timeout=120)
    report = json.loads(gate.stdout)
    inspected = [(c["verdict"], c["reason"]) for c in report["checks"] if c["id"] == "reward_inspected"]
    assert inspected[1:] == [("warn", f"median {review['median_seconds']:.1f} s a sample over 50 samples; "
                              "a careful read takes longer: ask the reviewer to look again")], inspected
    assert inspected[0][0] == "pass"


def test_a_careful_review_keeps_the_time_each_sample_was_read(tmp_path: Path) -> None:
    """Three samples (the review itself takes any size): ~2.1 s on each, and a first look at sample 1
    that moved on without a verdict adds to the time of its verdict later."""
    from llm_finetuning.records.inspection import review_timing

    record = make_inspection(copy_example("json-person", tmp_path), n=3)
    drive = _review(record, tmp_path)
    drive.expect(r"Sample 1/3")
    drive.expect(r"> ")
    time.sleep(1.1)
    drive.send("n")  # on without a verdict
    for i in (2, 3):
        drive.expect(rf"Sample {i}/3")
        drive.expect(r"> ")
        time.sleep(2.1)
        drive.send("a" if i == 2 else "u the name looks truncated")
    drive.expect(r"Sample 1/3")  # the one left without a verdict comes round again
    drive.expect(r"> ")
    time.sleep(1.1)
    drive.send("a")
    sealed = _seal_and_read(drive, record)
    first, second, third = _seconds(sealed)
    assert 2.2 <= first < 4.0, first  # 1.1 + 1.1: the two looks add up
    assert 2.1 <= second < 3.5 and 2.1 <= third < 3.5, (second, third)
    assert sealed["verdicts"]["s002"]["note"] == "the name looks truncated"
    timing = review_timing(sealed)
    assert (timing.timed, timing.median_seconds) == (3, sorted([first, second, third])[1])
    assert sealed["review"]["median_seconds"] == timing.median_seconds >= 2.0
    assert sealed["review"]["total_seconds"] == round(first + second + third, 1)
