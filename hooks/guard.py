#!/usr/bin/env python3
"""PreToolUse guard of the llm-finetuning plugin: keeps an agent inside the gate's rules in Claude Code.

Claude Code runs this before every Bash, Write, Edit, MultiEdit and NotebookEdit call, with the hook
input JSON on stdin (`{"tool_name": ..., "tool_input": {...}, "cwd": ...}`). It denies, each time naming
why and what the person should do:

- **records**: writing, moving, deleting or truncating anything in a brief's `records/` folder (a folder
  named `records` beside a brief) or any record file `finetune` wrote (JSON whose format is
  `llm-finetuning/...`, and the samples beside an inspection record), by a file tool or by Bash (redirects,
  `tee`, `cp`/`mv`/`rm`, `sed -i`, `truncate`, `dd`, `find -delete`, interpreter one-liners, scripts);
  writing record JSON by hand anywhere. Reading records is allowed (`cat`, `jq`, `grep`, `finetune ...`).
- **review**: any `finetune review`, however wrapped (`script`, `expect`, `python -m`, a script file).
  The person runs it in their own terminal.
- **records API**: code that imports `llm_finetuning.records` (which can re-seal a record), run through
  Bash or written to a file together with the functions that write records.
- **launch**: a launch of a run directory that `finetune render` did not produce after a passing gate, or
  whose manifest, brief, records or gate verdict no longer verify (`finetune launch`, `bash launch.sh`,
  `sbatch`, `trl grpo --config`, `accelerate launch`).

Answer: `{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
"permissionDecisionReason": "..."}}`; no output lets the call through to the normal permission flow.

It fails closed: an internal error, or a judgement that runs past DEADLINE_S, on a call whose input mentions
records, review, launch or the package denies the call with the reason. A call that touches none of them is
answered from the standard library alone, in tens of milliseconds (bench/guard_latency.py).

What it is: a guard that keeps an agent inside the rules in Claude Code. What it is not: a security
boundary. Code running as the user outside Claude Code can still rewrite a record and recompute its seal.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

PREFIX = "llm-finetuning guard"
# Below the hook's 60 s timeout in hooks.json, so that a slow judgement denies instead of timing out (a
# hook that times out lets the call through). LLM_FINETUNING_GUARD_DEADLINE_S overrides it.
DEADLINE_S = float(os.environ.get("LLM_FINETUNING_GUARD_DEADLINE_S") or 45)
FILE_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
# Words whose presence in a call's input means it may touch what the guard protects; an internal error on
# such a call denies it.
TOUCHING = re.compile(r"records|review|launch|llm_finetuning|llm-finetuning/|manifest\.json|grpo_config|sbatch|"
                      r"accelerate|\btrl\b|seal")
RECORD_MARKER = re.compile(r'"format"\s*:\s*"llm-finetuning/')
RECORDS_API = re.compile(r"llm_finetuning\.records|from\s+llm_finetuning\s+import\s+[^\n]*\brecords\b|"
                         r"llm_finetuning\.commands\.review")
RECORD_WRITERS = re.compile(r"\b(seal|set_verdict|save_progress|create_inspection|write_baseline|atomic_write_\w+|"
                            r"write_calibration)\b")
REVIEW = re.compile(r"finetune['\"]?\s*,?\s*['\"]?review\b|llm_finetuning(?:\.cli)?['\"]?\s*,?\s*['\"]?review\b|"
                    r"\brun_review\b")
BRIEF_LINE = re.compile(rb"^brief:\s*\d", re.MULTILINE)

SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "\n", "|&"}
WRAPPERS = {"env", "sudo", "nohup", "setsid", "time", "exec", "nice", "command", "stdbuf", "timeout", "srun", "uv",
            "run", "xargs", "unbuffer", "builtin", "doas", "ionice", "chronic", "flock"}
NOT_A_LAUNCH = {"--plan", "--help", "-h"}  # `finetune launch RUN_DIR --plan` only prints what it would run
RUN_FILES = ("launch.sh", "sbatch.sh", "grpo_config.yaml", "accelerate.yaml")
RUNNERS = {"bash", "sh", "zsh", "source", ".", "sbatch", "srun", "trl", "accelerate", "torchrun", "deepspeed",
           "python", "python3"}
SHELLS = {"bash", "sh", "zsh", "dash", "ksh"}
INTERPRETERS = {"python", "python3", "perl", "ruby", "node", "php", "awk", "gawk", "mawk", "jshell", "lua", "Rscript"}
# Programs that only read the paths they are given (a redirect of their output is judged on its own).
READERS = {"cat", "head", "tail", "less", "more", "ls", "stat", "wc", "grep", "egrep", "fgrep", "rg", "jq", "file",
           "sha256sum", "sha1sum", "md5sum", "b2sum", "diff", "cmp", "du", "tree", "realpath", "readlink", "basename",
           "dirname", "echo", "printf", "test", "[", "true", "false", "cut", "tr", "nl", "od", "xxd", "hexdump",
           "column", "bat", "view", "pwd", "which", "type", "cd"}
GIT_READERS = {"status", "diff", "log", "show", "ls-files", "blame", "grep", "rev-parse", "describe", "shortlog"}
COPIERS = {"cp", "ln", "install", "rsync", "scp"}  # read their sources, write their destination
FIX_LAUNCH = "run `finetune gate BRIEF`, follow its fixes, then `finetune render BRIEF -o RUN_DIR`, and launch that RUN_DIR"
WHY_RECORDS = ("Records are written only by `finetune baseline`, `finetune inspect` and `finetune calibrate-judge`, "
               "and an inspection is sealed only by a person running `finetune review` in their own terminal; "
               "the gate trusts them because no agent edits them")
ASK_PERSON = ("ask the person: if the record is wrong or stale, `finetune inspect BRIEF` (or `finetune baseline BRIEF`) "
              "makes a new one, and the person reviews it with `finetune review RECORD` in their own terminal")


class Denied(Exception):
    """The call is denied; the message says why and what to do."""


# --- what the guard protects -------------------------------------------------------------------------------

_brief_dirs: dict[Path, bool] = {}


def holds_a_brief(folder: Path) -> bool:
    """Whether `folder` has a brief (a YAML file with a top-level `brief: N`)."""
    if folder not in _brief_dirs:
        found = False
        try:
            names = [n for n in os.listdir(folder) if n.endswith((".yaml", ".yml"))]
        except OSError:
            names = []
        for name in names[:50]:
            try:
                with open(folder / name, "rb") as fh:
                    if BRIEF_LINE.search(fh.read(65536)):
                        found = True
                        break
            except OSError:
                continue
        _brief_dirs[folder] = found
    return _brief_dirs[folder]


def is_record_file(path: Path) -> bool:
    """A file `finetune` wrote as a record (its JSON names an llm-finetuning format), or the samples beside one."""
    if path.name.endswith(".samples.jsonl"):
        return is_record_file(path.with_name(path.name[: -len(".samples.jsonl")] + ".json"))
    if path.suffix != ".json" or not path.is_file():  # a FIFO named x.json would block the read
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(262144)
    except OSError:
        return False
    return RECORD_MARKER.search(head.decode("utf-8", "replace")) is not None


def protected(path: Path) -> str | None:
    """Why `path` may not be written, moved or deleted by the agent; None when it may."""
    for folder in (path, *path.parents):
        if folder.name == "records" and holds_a_brief(folder.parent):
            if folder == path:
                return f"{path} is the records folder of the brief beside it"
            return f"{path} is in {folder}, the records folder of the brief beside it"
    if is_record_file(path):
        return f"{path} is an llm-finetuning record"
    return None


def protected_inside(folder: Path, budget: int = 5000) -> str | None:
    """A protected records folder or record inside `folder` (deleting or moving it would take that along)."""
    if not folder.is_dir():
        return None
    seen = 0
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        if here.name == "records" and holds_a_brief(here.parent):
            return f"{folder} holds {here}, the records folder of a brief"
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("node_modules", "__pycache__", ".venv")]
        for name in files:
            if name.endswith(".json") and is_record_file(here / name):
                return f"{folder} holds the record {here / name}"
        seen += len(files) + len(dirs)
        if seen > budget:
            return None
    return None


# --- shell parsing ------------------------------------------------------------------------------------------

HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def split_heredocs(command: str) -> tuple[str, list[str]]:
    """The command without its here-document bodies, and the bodies (code fed to a program's stdin)."""
    lines = command.split("\n")
    kept: list[str] = []
    bodies: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        kept.append(line)
        i += 1
        for match in HEREDOC.finditer(line):
            delimiter = match.group(2)
            body: list[str] = []
            while i < len(lines) and lines[i].strip() != delimiter:
                body.append(lines[i])
                i += 1
            i += 1  # the delimiter line
            bodies.append("\n".join(body))
    return "\n".join(kept), bodies


def segments(command: str) -> list[list[str]] | None:
    """The command's simple commands as token lists (redirect operators kept as tokens), or None when it
    cannot be tokenised."""
    lexer = shlex.shlex(command.replace("\\\n", " "), posix=True, punctuation_chars=";&|()\n<>")
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


def split_redirects(seg: list[str]) -> tuple[list[str], list[str]]:
    """(words, files written by output redirects) of one simple command."""
    words: list[str] = []
    written: list[str] = []
    i = 0
    while i < len(seg):
        tok = seg[i]
        if tok and set(tok) <= set("<>&|") and ">" in tok:
            target = seg[i + 1] if i + 1 < len(seg) else ""
            if tok.endswith("&") or target == "&":  # >&2, 2>&1: a file descriptor, not a file
                i += 2
                continue
            if words and words[-1].isdigit():  # the fd number of `2>`
                words.pop()
            written.append(target)
            i += 2
            continue
        if tok and set(tok) <= set("<"):
            i += 2  # an input redirect, a here-document's delimiter or a here-string: read, not written
            continue
        words.append(tok)
        i += 1
    return words, written


def strip_prefix(seg: list[str]) -> list[str]:
    """Drop `VAR=value` assignments and wrappers such as env, sudo, nohup, timeout 60."""
    i = 0
    while i < len(seg):
        tok, before = seg[i], seg[i - 1] if i else ""
        assignment = "=" in tok and not tok.startswith("-") and tok.split("=", 1)[0].isidentifier()
        wrapper_option = tok.startswith("-") and os.path.basename(before) in WRAPPERS
        duration = before == "timeout" and tok[:1].isdigit()
        if not (assignment or os.path.basename(tok) in WRAPPERS or wrapper_option or duration):
            break
        i += 1
    return seg[i:]


def program(words: list[str]) -> str:
    name = os.path.basename(words[0]) if words else ""
    return "python" if re.fullmatch(r"python[0-9.]*", name) else name


def resolve(here: Path, word: str) -> Path:
    return (here / os.path.expanduser(word)).resolve()


# --- the rules ----------------------------------------------------------------------------------------------


def check_code(code: str, where: str) -> None:
    """Text that will run: no `finetune review`, no records API."""
    if REVIEW.search(code):
        raise Denied(f"{where} runs `finetune review`. Only the person signs an inspection: they run `finetune review` "
                     "in their own terminal after reading every sample. Fix: ask the person to run "
                     "`finetune review RECORD` themselves, and wait for them")
    if RECORDS_API.search(code):
        raise Denied(f"{where} imports the llm_finetuning records API, which can write and re-seal records. "
                     f"{WHY_RECORDS}. Fix: use the `finetune` verbs; {ASK_PERSON}")


def code_mentions_protected(code: str, here: Path) -> str | None:
    """A protected path named in interpreter code (quoted strings and path-like words)."""
    for word in set(re.findall(r"""["']([^"'\n]{1,400})["']|([\w./~-]*records[\w./-]*)""", code)):
        text = word[0] or word[1]
        if not text or "\0" in text:
            continue
        reason = protected(resolve(here, text)) or protected_inside(resolve(here, text))
        if reason:
            return reason
    return None


def script_file(words: list[str], here: Path) -> Path | None:
    """The script a shell or interpreter runs (`bash x.sh`, `python x.py`, `./x.sh`), if any."""
    prog = program(words)
    args = [w for w in words[1:] if not w.startswith("-")]
    if prog in SHELLS | INTERPRETERS | {"source", "."} and args and "-c" not in words and "-e" not in words:
        candidate = resolve(here, args[0])
    elif words and ("/" in words[0]) and prog not in READERS:
        candidate = resolve(here, words[0])
    else:
        return None
    return candidate if candidate.is_file() else None


def read_text(path: Path, limit: int = 1 << 20) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def check_bash(command: str, here: Path, depth: int = 0) -> list[Path]:
    """Deny (raise Denied) what the command may not do; return the run directories it would launch."""
    if RECORD_MARKER.search(command):
        raise Denied(f"the command writes llm-finetuning record JSON by hand. {WHY_RECORDS}. Fix: {ASK_PERSON}")
    text, bodies = split_heredocs(command)
    for body in bodies:
        check_code(body, "A here-document in the command")
    segs = segments(text)
    if segs is None:
        if TOUCHING.search(command):
            raise Denied("the command cannot be parsed (unbalanced quotes), so what it does to records or launches "
                         "cannot be checked. Fix: write it as plain commands with balanced quotes")
        return []
    launches: list[Path] = []
    writes: list[str] = []
    read_protected = xargs_writer = False
    for raw in segs:
        words, redirected = split_redirects(raw)
        fed_by_xargs = any(os.path.basename(w) == "xargs" for w in words[:3])
        words = strip_prefix(words)
        writes += [r for target in redirected if (r := protected(resolve(here, target)))]
        if not words:
            continue
        prog = program(words)
        args = words[1:]
        if prog == "cd" and args:
            here = resolve(here, args[0])
            continue
        if prog not in READERS:
            check_code(" ".join(words), "The command")
            if prog in SHELLS | INTERPRETERS and len(segs) > 1 and not [a for a in args if not a.startswith("-")]:
                check_code(text, "The command (it pipes text into a shell or interpreter)")
        if prog in SHELLS and "-c" in words:
            at = words.index("-c") + 1
            if depth < 3 and at < len(words):
                launches += check_bash(words[at], here, depth + 1)
            continue
        script = script_file(words, here)
        if script is not None:
            code = read_text(script)
            check_code(code, f"The script {script}")
            shell_script = prog in SHELLS | {"source", "."} or (code.startswith("#!") and "sh" in code.split("\n", 1)[0])
            if shell_script and depth < 3:
                launches += check_bash(code, here, depth + 1)
            elif (reason := code_mentions_protected(code, here)):
                writes.append(reason)
        if prog == "python" and args[:2] in (["-m", "llm_finetuning.cli"], ["-m", "llm_finetuning"]):
            prog, args = "finetune", args[2:]
        if prog == "finetune":
            if args[:1] == ["launch"] and not NOT_A_LAUNCH & set(args):
                positional = [a for a in args[1:] if not a.startswith("-")]
                if positional:
                    launches.append(resolve(here, positional[0]))
            continue  # the other verbs write records only as their contract says (baseline, inspect, ...)
        launches += run_files(prog, words, here)
        if prog in INTERPRETERS:
            reason = code_mentions_protected(" ".join(args) + "\n" + "\n".join(bodies), here)
        elif is_reader(prog, words):
            reason = None
            read_protected = read_protected or mentioned_protected(prog, words, here) is not None
        else:
            xargs_writer = xargs_writer or fed_by_xargs
            reason = mentioned_protected(prog, words, here)
        if reason:
            writes.append(reason)
    if xargs_writer and read_protected:
        writes.append("it lists a records folder or record and hands the names to `xargs` with a program that writes")
    if writes:
        raise Denied(f"the command would write, move or delete a record: {writes[0]}. {WHY_RECORDS}. "
                     f"Fix: read records with `cat` or `jq` only; {ASK_PERSON}")
    return launches


def is_reader(prog: str, words: list[str]) -> bool:
    if prog == "git":
        return len(words) > 1 and words[1] in GIT_READERS
    if prog in ("sed", "perl"):
        return not any(w.startswith("-i") or w in ("--in-place",) for w in words[1:])
    if prog == "find":
        return not {"-delete", "-exec", "-execdir", "-ok", "-fprint", "-fprintf", "-fls"} & set(words)
    return prog in READERS


def mentioned_protected(prog: str, words: list[str], here: Path) -> str | None:
    """The first protected path the command's arguments name as something it may write, move or delete."""
    args = [w for w in words[1:] if w != "--"]
    if prog in COPIERS:
        plain = [a for a in args if not a.startswith("-")]
        if "-t" in args and args.index("-t") + 1 < len(args):
            targets = [args[args.index("-t") + 1]]
        else:
            targets = plain[-1:]
        if prog == "ln" and len(plain) == 1:
            targets = []
        return next((r for t in targets if (r := protected(resolve(here, t)))), None)
    for arg in args:
        value = arg.split("=", 1)[1] if "=" in arg and (arg.startswith("-") or arg.startswith("of=")) else arg
        if not value or value.startswith("-"):
            continue
        path = resolve(here, value)
        reason = protected(path)
        if reason is None and prog in ("rm", "mv", "rmdir", "find", "rsync", "git", "chmod", "chown"):
            reason = protected_inside(path)
        if reason is None and any(ch in value for ch in "*?["):
            import glob

            reason = next((r for m in glob.glob(str(here / value))[:200] if (r := protected(Path(m).resolve()))), None)
        if reason:
            return reason
    return None


def run_files(prog: str, words: list[str], here: Path) -> list[Path]:
    """Run directories whose rendered files this command runs directly."""
    files = words if prog in RUNNERS or prog == "python" else words[:1]
    out = []
    for tok in files:
        value = tok.split("=", 1)[1] if tok.startswith("--") and "=" in tok else tok
        if os.path.basename(value) in RUN_FILES:
            out.append(resolve(here, value).parent)
    return out


def check_file_tool(tool: str, tool_input: dict[str, Any], here: Path) -> None:
    raw = tool_input.get(FILE_TOOLS[tool])
    if not isinstance(raw, str) or not raw:
        return
    path = resolve(here, raw)
    reason = protected(path)
    if reason:
        raise Denied(f"{tool} is not allowed here: {reason}. {WHY_RECORDS}. Fix: {ASK_PERSON}")
    if path.name == "manifest.json" and (path.parent / "grpo_config.yaml").exists():
        raise Denied(f"{tool} on {path} is not allowed: it binds a rendered run to the gate's verdict. "
                     f"Fix: change the brief and {FIX_LAUNCH}")
    texts = [tool_input.get(k) for k in ("content", "new_string", "new_source")]
    texts += [e.get("new_string") for e in tool_input.get("edits") or [] if isinstance(e, dict)]
    new = "\n".join(t for t in texts if isinstance(t, str))
    if path.suffix in (".json", ".jsonl") and RECORD_MARKER.search(new):
        raise Denied(f"{tool} would write llm-finetuning record JSON by hand to {path}. {WHY_RECORDS}. Fix: {ASK_PERSON}")
    if RECORDS_API.search(new) and RECORD_WRITERS.search(new):
        raise Denied(f"{tool} would write code to {path} that uses the llm_finetuning records API to write or seal a "
                     f"record. {WHY_RECORDS}. Fix: use the `finetune` verbs; {ASK_PERSON}")


# --- launches ------------------------------------------------------------------------------------------------


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
        return None, ["it has no manifest.json: it was not rendered by `finetune render` after a passing gate"]
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


def gate_verdict(brief: Path) -> dict[str, Any]:
    """The gate's JSON report for the brief: in process when llm_finetuning imports, else through the CLI."""
    if sys.flags.no_site:
        import site

        site.main()  # the guard starts without site-packages for speed; the gate needs them
    try:
        from llm_finetuning.gate import run_gate
    except ImportError:
        return _gate_through_cli(brief)
    report: dict[str, Any] = run_gate(brief).to_json()
    return report


def _gate_through_cli(brief: Path) -> dict[str, Any]:
    import shutil
    import subprocess

    exe = shutil.which("finetune") or str(Path(__file__).resolve().parent.parent / "bin" / "finetune")
    proc = subprocess.run([exe, "gate", str(brief), "--json"], capture_output=True, text=True, timeout=DEADLINE_S - 5)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        reason = (proc.stderr or proc.stdout).strip()[:500] or f"`finetune gate` exited {proc.returncode}"
        raise Denied(f"the gate cannot be run here ({reason}). Fix: install the CLI with `llm-finetuning-setup`") from None
    if not isinstance(report, dict):
        raise Denied("`finetune gate --json` did not print a report. Fix: reinstall with `llm-finetuning-setup`")
    return report


def run_dir_problems(run_dir: Path) -> list[str]:
    manifest, problems = manifest_problems(run_dir)
    if manifest is None or problems:
        return problems
    report = gate_verdict((run_dir / manifest["brief"]["path"]).resolve())
    if not report.get("passed"):  # a rejected brief, or unusable input: the same error shape either way
        failed = [f"{p.get('id')}: {p.get('path')}: {p.get('message')} Fix: {p.get('fix')}"
                  for p in report.get("problems", []) if isinstance(p, dict) and p.get("severity") == "error"]
        return ["the gate rejects the brief now: " + ("; ".join(failed[:5]) or "`finetune gate --json` named no problem")]
    if report.get("fingerprint") != manifest["gate_fingerprint"]:
        return ["the gate's fingerprint differs from manifest.json: the evidence changed since rendering"]
    return []


def check_launches(run_dirs: list[Path]) -> None:
    reasons = [f"{d}: {p}" for d in dict.fromkeys(run_dirs) for p in run_dir_problems(d)]
    if reasons:
        raise Denied("launch refused: " + " | ".join(reasons) + f". Fix: {FIX_LAUNCH}")


# --- entry ---------------------------------------------------------------------------------------------------


def decide(event: dict[str, Any]) -> str | None:
    """The deny reason for this hook input, or None to let the call through."""
    tool = event.get("tool_name")
    tool_input = event.get("tool_input")
    if not isinstance(tool_input, dict):
        return None
    here = Path(str(event.get("cwd") or os.getcwd()))
    try:
        if tool == "Bash":
            command = tool_input.get("command")
            if isinstance(command, str):
                check_launches(check_bash(command, here))
        elif tool in FILE_TOOLS:
            check_file_tool(str(tool), tool_input, here)
    except Denied as denial:
        return f"{PREFIX}: {denial}.".replace(f"{here.resolve()}/", "")  # paths as the agent named them
    return None


def answer(reason: str | None) -> None:
    """Claude Code's PreToolUse answer: a deny with its reason, or nothing (the call goes through)."""
    if reason is not None:
        json.dump({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                          "permissionDecisionReason": reason}}, sys.stdout)
        sys.stdout.write("\n")
    sys.stdout.flush()


def unjudged(raw: str, problem: str) -> str | None:
    """The deny reason for a call the guard could not judge: only calls that touch what it protects."""
    if not TOUCHING.search(raw):
        return None
    return (f"{PREFIX}: this call touches llm-finetuning records, review or a launch, and the guard could not "
            f"judge it ({problem}), so it is denied. Fix: retry it as a plain command; "
            "if it keeps failing, ask the person to run it in their own terminal")


def main() -> int:
    raw = sys.stdin.read()

    def past_deadline(signum: int, frame: Any) -> None:
        # Answer and leave at once: an exception raised here could be caught by the code it interrupts.
        answer(unjudged(raw, f"TimeoutError: judging the call took longer than {DEADLINE_S:g} s"))
        os._exit(0)

    try:
        event = json.loads(raw or "{}")
        if not isinstance(event, dict):
            raise ValueError("the hook input is not a JSON object")
        if hasattr(signal, "setitimer"):
            signal.signal(signal.SIGALRM, past_deadline)
            signal.setitimer(signal.ITIMER_REAL, DEADLINE_S)
        reason = decide(event)
    except Exception as exc:  # noqa: BLE001 - fail closed on what touches records, review or launch
        reason = unjudged(raw, f"{type(exc).__name__}: {exc}")
    if hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, 0)
    answer(reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
