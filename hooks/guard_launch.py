#!/usr/bin/env python3
"""PreToolUse guard: deny a launch whose run directory was not produced by a passing Phase 1 gate.

Claude Code runs this before every Bash tool call with the hook input JSON on stdin
(`{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": ...}, "cwd": ...}`).
It looks for launches in the command: `finetune launch RUN_DIR` (also `python -m llm_finetuning.cli
launch`, inside `bash -c '...'`, after `cd DIR &&`), and direct runs of a rendered run's files
(`bash RUN_DIR/launch.sh`, `sbatch RUN_DIR/sbatch.sh`, `trl grpo --config RUN_DIR/grpo_config.yaml`,
`accelerate launch ... RUN_DIR/...`). For each, it requires RUN_DIR/manifest.json, checks every sha256
in it (rendered files, brief, records) with the standard library, then runs the gate on the manifest's
brief (in process when llm_finetuning imports, else `finetune gate BRIEF --json`) and requires a pass
whose fingerprint equals the manifest's. Anything else is denied with the reason and the fix:

    {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                            "permissionDecisionReason": "..."}}

Commands that launch nothing get no output (the normal permission flow applies). Standard library only:
parsing the input needs no installed package. A guard against mistakes, not a security boundary.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "\n", "|&"}
WRAPPERS = {"env", "sudo", "nohup", "setsid", "time", "exec", "nice", "command", "stdbuf", "timeout", "srun", "uv",
            "run"}
NOT_A_LAUNCH = {"--plan", "--help", "-h"}  # `finetune launch RUN_DIR --plan` only prints what it would run
RUN_FILES = ("launch.sh", "sbatch.sh", "grpo_config.yaml", "accelerate.yaml")
# programs that run a rendered file given as an argument (reading one, e.g. `cat`, launches nothing)
RUNNERS = {"bash", "sh", "zsh", "source", ".", "sbatch", "srun", "trl", "accelerate", "torchrun", "deepspeed",
           "python", "python3"}
FIX = "run `finetune gate BRIEF`, follow its fixes, then `finetune render BRIEF -o RUN_DIR`, and launch that RUN_DIR"


def segments(command: str) -> list[list[str]] | None:
    """The command's simple commands as token lists, or None when it cannot be tokenised."""
    lexer = shlex.shlex(command.replace("\\\n", " "), posix=True, punctuation_chars=";&|()\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    out: list[list[str]] = [[]]
    for tok in tokens:
        if tok in SEPARATORS or set(tok) <= set(";&|()\n"):
            out.append([])
        else:
            out[-1].append(tok)
    return [s for s in out if s]


def _strip_prefix(seg: list[str]) -> list[str]:
    """Drop `VAR=value` assignments and wrappers such as env, sudo, nohup, timeout 60."""
    i = 0
    while i < len(seg):
        tok, before = seg[i], seg[i - 1] if i else ""
        assignment = "=" in tok and not tok.startswith("-") and tok.split("=", 1)[0].isidentifier()
        wrapper_option = tok.startswith("-") and before in WRAPPERS
        duration = before == "timeout" and tok[:1].isdigit()
        if not (assignment or tok in WRAPPERS or wrapper_option or duration):
            break
        i += 1
    return seg[i:]


def launch_targets(command: str, cwd: Path, depth: int = 0) -> tuple[list[Path], str]:
    """Run directories the command would launch (resolved against cwd and any `cd`), and a parse problem."""
    segs = segments(command)
    if segs is None:
        words = command.split()
        if "finetune" in command and "launch" in words or any(f in command for f in RUN_FILES):
            return [], "the command cannot be parsed (unbalanced quotes), so its launch cannot be checked"
        return [], ""
    targets: list[Path] = []
    here = cwd
    for raw in segs:
        seg = _strip_prefix(raw)
        if not seg:
            continue
        prog = os.path.basename(seg[0])
        if prog == "cd" and len(seg) > 1:
            here = (here / os.path.expanduser(seg[1])).resolve()
            continue
        if prog in ("bash", "sh", "zsh") and "-c" in seg and depth < 3:
            inner = seg[seg.index("-c") + 1] if seg.index("-c") + 1 < len(seg) else ""
            found, problem = launch_targets(inner, here, depth + 1)
            if problem:
                return [], problem
            targets += found
            continue
        args = seg[1:]
        if prog.startswith("python") and args[:2] in (["-m", "llm_finetuning.cli"], ["-m", "llm_finetuning"]):
            prog, args = "finetune", args[2:]
        if prog == "finetune" and args[:1] == ["launch"]:
            if NOT_A_LAUNCH & set(args):
                continue
            positional = [a for a in args[1:] if not a.startswith("-")]
            if positional:
                targets.append((here / os.path.expanduser(positional[0])).resolve())
            continue
        files = seg if prog in RUNNERS or prog.startswith("python") else seg[:1]
        for tok in files:
            value = tok.split("=", 1)[1] if tok.startswith("--") and "=" in tok else tok
            if os.path.basename(value) in RUN_FILES:
                targets.append((here / os.path.expanduser(value)).resolve().parent)
    return list(dict.fromkeys(targets)), ""


def _sha256(path: Path) -> str | None:
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def manifest_problems(run_dir: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """The manifest and every sha256 in it that no longer holds."""
    path = run_dir / "manifest.json"
    if not path.is_file():
        return None, [f"{run_dir} has no manifest.json: it was not rendered by `finetune render` after a passing gate"]
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        files = dict(manifest["files"])
        brief = manifest["brief"]
        records = dict(manifest.get("records", {}))
        fingerprint = manifest["gate_fingerprint"]
        assert isinstance(brief["path"], str) and isinstance(brief["sha256"], str) and isinstance(fingerprint, str)
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        return None, [f"{path} is not a manifest written by `finetune render`"]
    problems = []
    for name, digest in sorted(files.items()):
        if _sha256(run_dir / name) != digest:
            problems.append(f"{name} was edited or removed after rendering")
    if _sha256(run_dir / brief["path"]) != brief["sha256"]:
        problems.append(f"the brief {brief['path']} changed after rendering")
    for key, rec in sorted(records.items()):
        if isinstance(rec, dict) and _sha256(run_dir / str(rec.get("path"))) != rec.get("sha256"):
            problems.append(f"records.{key} ({rec.get('path')}) changed after rendering")
    return manifest, problems


def gate_verdict(brief: Path) -> dict[str, Any] | None:
    """The gate's JSON report for the brief, in process or through the CLI; None when neither exists."""
    try:
        from llm_finetuning.gate import run_gate

        return run_gate(brief).to_json()  # type: ignore[no-any-return]
    except ImportError:
        pass
    except Exception as exc:  # noqa: BLE001 - an unreadable brief is a refusal, reported below
        return {"passed": False, "error": str(exc)}
    import shutil
    import subprocess

    exe = shutil.which("finetune")
    if exe is None:
        return None
    proc = subprocess.run([exe, "gate", str(brief), "--json"], capture_output=True, text=True, timeout=50)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        return {"passed": False, "error": (proc.stderr or proc.stdout).strip()[:500]}
    return report if isinstance(report, dict) else None


def run_dir_problems(run_dir: Path) -> list[str]:
    manifest, problems = manifest_problems(run_dir)
    if manifest is None or problems:
        return problems
    brief = (run_dir / manifest["brief"]["path"]).resolve()
    report = gate_verdict(brief)
    if report is None:
        return ["the gate cannot be run here (neither llm_finetuning nor `finetune` is installed)"]
    if not report.get("passed"):
        failed = [f"{c.get('id')}: {c.get('path')}: {c.get('reason')} Fix: {c.get('fix')}"
                  for c in report.get("checks", []) if c.get("verdict") == "fail"]
        return ["the gate rejects the brief now: " + ("; ".join(failed[:5]) or str(report.get("error") or report.get("fix")))]
    if report.get("fingerprint") != manifest["gate_fingerprint"]:
        return ["the gate's fingerprint differs from manifest.json: the evidence changed since rendering"]
    return []


def decide(event: dict[str, Any]) -> str | None:
    """The deny reason for this hook input, or None to let the call through."""
    if event.get("tool_name") != "Bash":
        return None
    tool_input = event.get("tool_input") or {}
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if not isinstance(command, str):
        return None
    cwd = Path(str(event.get("cwd") or os.getcwd()))
    targets, problem = launch_targets(command, cwd)
    if problem:
        return f"llm-finetuning launch guard: {problem}. Fix: run the launch as a plain `finetune launch RUN_DIR`"
    reasons = []
    for run_dir in targets:
        for p in run_dir_problems(run_dir):
            reasons.append(f"{run_dir}: {p}")
    if not reasons:
        return None
    return "llm-finetuning launch guard: " + " | ".join(reasons) + f". Fix: {FIX}"


def main() -> int:
    try:
        event = json.loads(sys.stdin.read() or "{}")
    except ValueError:
        return 0  # not a hook input we understand; nothing to guard
    if not isinstance(event, dict):
        return 0
    reason = decide(event)
    if reason is not None:
        json.dump({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                          "permissionDecisionReason": reason}}, sys.stdout)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
