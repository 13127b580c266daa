"""`finetune review`: refuses without a terminal, resumes after an interruption, seals, and a
disagreement keeps the record from the gate. Driven through a real pseudo-terminal."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from .conftest import FINETUNE, cli_env, copy_example, load, make_inspection
from .ptydrive import PtyDriver


def _brief(tmp_path: Path) -> Path:
    return copy_example("json-person", tmp_path)


def _verify(brief_path: Path, record: Path) -> list:
    from llm_finetuning.models import model_identity
    from llm_finetuning.records.inspection import verify_inspection

    brief = load(brief_path)
    return verify_inspection(brief, record, model_identity(brief.model, brief.folder))[1]


def _review(record: Path, tmp_path: Path, *options: str) -> PtyDriver:
    env = cli_env(USER="ada", GIT_CONFIG_GLOBAL=str(tmp_path / "no-gitconfig"), GIT_CONFIG_NOSYSTEM="1",
                  TERM="xterm")
    return PtyDriver([*FINETUNE, "review", str(record), *options], env=env, cwd=str(tmp_path))


def test_review_refuses_without_a_terminal(tmp_path: Path) -> None:
    record = make_inspection(_brief(tmp_path))
    before = record.read_bytes()
    done = subprocess.run([*FINETUNE, "review", str(record)], input="a\n" * 60, capture_output=True, text=True,
                          env=cli_env(), timeout=60)
    assert done.returncode == 2
    assert "interactive terminal" in done.stderr
    assert f"finetune review {record}" in done.stderr
    assert record.read_bytes() == before  # nothing signed, nothing changed


def test_review_resumes_after_interruption_then_seals(tmp_path: Path) -> None:
    brief_path = _brief(tmp_path)
    record = make_inspection(brief_path)

    first = _review(record, tmp_path)
    for i in range(1, 4):
        first.expect(rf"Sample {i}/50")
        first.expect(r"> ")
        first.send("a" if i != 2 else "u not sure about the key order")
    first.expect(r"Sample 4/50")
    first.expect(r"> ")
    first.interrupt()  # the terminal goes away mid-review: no chance to save anything more
    first.wait()
    saved = json.loads(record.read_text())
    assert [saved["verdicts"][s]["verdict"] for s in ("s000", "s001", "s002")] == ["agree", "unsure", "agree"]
    assert saved["verdicts"]["s001"]["note"] == "not sure about the key order"

    key = tmp_path / "my-keys" / "reviewer.ed25519"
    second = _review(record, tmp_path, "--key", str(key))
    second.expect(r"Resuming: 3 of 50 samples already have a verdict")
    second.expect(r"Sample 4/50")
    second.expect(r"> ")
    second.send("b")  # back to sample 3: its verdict is shown and can be changed
    second.expect(r"Sample 3/50")
    second.expect(r"Your verdict so far: agree")
    second.expect(r"> ")
    second.send("a")
    for i in range(4, 51):
        second.expect(rf"Sample {i}/50")
        second.expect(r"> ")
        second.send("a")
    second.expect(r"\[s\] seal the review")
    second.send("s")
    second.expect(r"recorded as the reviewer \[ada\]")
    second.send("")
    signed = second.expect(r"No disagreements")
    assert second.wait() == 0

    sealed = json.loads(record.read_text())
    assert sealed["review"]["reviewer"] == "ada"
    assert sealed["review"]["counts"] == {"agree": 49, "disagree": 0, "unsure": 1}
    assert _verify(brief_path, record) == []
    # signed with the key made at --key on this first review, which the project now trusts, as it was told
    from llm_finetuning.records.inspection import check_inspection

    key_id = sealed["seal"]["signature"]["key_id"]
    trusted = brief_path.parent / ".llm-finetuning" / "trusted-keys"  # in no project: beside the records folder
    told = " ".join(signed.split())
    assert f"signed with key {key_id}" in told and f"Made your signing key {key}" in told
    assert f"Added your public key {key_id} to {trusted} as 'ada'" in told
    assert trusted.read_text().endswith(f"ed25519 {sealed['seal']['signature']['public_key']} ada\n")
    assert check_inspection(load(brief_path), record).signer.who() == f"ada ({key_id})"


def test_disagreement_blocks_the_gate(tmp_path: Path) -> None:
    brief_path = _brief(tmp_path)
    record = make_inspection(brief_path)
    drive = _review(record, tmp_path)
    for i in range(1, 51):
        drive.expect(rf"Sample {i}/50")
        drive.expect(r"> ")
        if i == 5:
            drive.send("d")
            drive.expect(r"What is wrong with the reward's value\?")
            drive.send("an age off by one should still be rejected, but the name check is too lax")
        else:
            drive.send("a")
    drive.expect(r"\[s\] seal the review")
    drive.send("s")
    drive.expect(r"recorded as the reviewer")
    drive.send("Grace Hopper")
    drive.expect(r"disagreed\s+with\s+the\s+reward\s+on\s+1\s+sample\(s\):\s+s004")
    assert drive.wait() == 1

    problems = _verify(brief_path, record)
    assert [(p.id, p.path) for p in problems] == [("disagreement", "verdicts")]
    assert "s004" in problems[0].message and "name check is too lax" in problems[0].message

    again = _review(record, tmp_path)  # a sealed record is shown, never reopened
    again.expect(r"already sealed\s+\(reviewer:\s+Grace\s+Hopper\)")
    assert again.wait() == 1


def test_review_of_a_missing_record_says_what_writes_it(tmp_path: Path) -> None:
    driver = _review(tmp_path / "records" / "inspection.json", tmp_path)
    driver.expect(r"Fix: run `finetune inspect BRIEF`")
    assert driver.wait() == 2
    assert "inspection record" in driver.text and "does not exist" in driver.text
