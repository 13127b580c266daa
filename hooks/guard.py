#!/usr/bin/env python3
"""PreToolUse guard of the llm-finetuning plugin: the first line that keeps an agent inside the gate's rules.

Claude Code runs this before every Bash, Write, Edit, MultiEdit and NotebookEdit call, with the hook
input JSON on stdin (`{"tool_name": ..., "tool_input": {...}, "cwd": ...}`). It denies, each time naming
why and what to do instead (docs/claude-code.md, "The guard", lists every rule with examples):

- **records**: writing, moving, deleting, linking or truncating anything in a brief's `records/` folder (a
  folder named `records` beside a brief) or any record file `finetune` wrote (JSON whose format is
  `llm-finetuning/...`, and the samples beside an inspection record): by a file tool, a redirect, a program
  that writes (`tee`, `cp`, `mv`, `rm`, `install`, `ln`, `sed -i`, `dd`, `truncate`, `find -delete`),
  extracting an archive or applying a patch over them, interpreter code that names them (also when it
  builds the name from pieces: concatenated literals, `chr()`, escapes, base64), a script it runs, a
  Makefile recipe; writing record JSON by hand anywhere. Reading records is allowed.
- **review**: any `finetune review`, however wrapped (`script`, `expect`, `python -m`, a script file).
- **records API**: code that imports `llm_finetuning.records` (also through `importlib` with the name
  built from pieces), run through Bash or written to a file together with the functions that write records.
- **training outside `finetune launch`**: `trl grpo`, `accelerate launch`/`torchrun`/`deepspeed`/`python`
  of `trl.scripts.grpo`, `llm_finetuning.launch.trainer` or a script that uses `GRPOTrainer`, `make` whose
  Makefile runs one of these, writing such a script; a launch of a run directory that `finetune render`
  did not produce after a passing gate, or whose files, brief, records or verdict changed since; writing
  a run directory's rendered files.
- **switching the guard off**: writing the plugin's own `hooks/` or `.claude-plugin/` files, a `python3`
  or `sh` in a folder on the guard's PATH, `.claude/settings*.json` by shell or with `disableAllHooks` or
  the plugin disabled, `claude plugin disable/uninstall`.
- **what it cannot judge**, when the call names records, review, seal, a run directory's files, a trainer
  or the guard (PROTECTED_WORDS, also hidden in escapes or base64), or when it writes where records or a
  run directory lie: a variable, command substitution, backticks, brace expansion or an unlistable glob in
  a command name, a path written or a program's arguments; `eval`, `bash -c` with such text; text piped
  into a shell or interpreter from a program it cannot read (`base64 -d | bash`); here-documents with
  expansions into interpreters; code that writes files it names from its environment, arguments or input;
  `xargs` feeding a program that writes; an unparseable command.

Answer: `{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
"permissionDecisionReason": "..."}}`; no output lets the call through to the normal permission flow.

It fails closed: a judgement still running at DEADLINE_S (below the hook's timeout in hooks.json) is denied,
whatever the call; an internal error on a call that names what it protects is denied. A call that touches
none of it is answered from the standard library alone, in tens of milliseconds (bench/guard_latency.py).

What it is not: a security boundary. It reads command lines, and a command line can compute anything; the
records are protected by Claude Code's sandbox and the reviewer's signature, which do not depend on
parsing. Code run as the user outside Claude Code is not seen at all.
"""

from __future__ import annotations

# Every import happens here, before the guard reads the call or the project: hooks/guard starts Python
# isolated (`-I -S`: no working directory, PYTHONPATH, user or site packages on sys.path), and nothing is
# imported later, so no module the agent writes into a project can run in the guard's process.
import base64
import binascii
import fnmatch
import functools
import json
import os
import re
import select
import signal
import stat
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PLUGIN_ROOT = Path(__file__).resolve().parent.parent
PLUGIN_SRC = PLUGIN_ROOT / "src"  # the plugin is this repository: its own copy of the package's code
if str(PLUGIN_SRC) not in sys.path:
    sys.path.append(str(PLUGIN_SRC))  # after the standard library: only llm_finetuning is looked up there
try:  # the package's hashing, manifest check and record writers: standard library only, so safe to import here
    from llm_finetuning import integrity
except ImportError:  # a plugin folder without src/: main() denies every call that names what the guard protects
    integrity = None  # type: ignore[assignment]

PREFIX = "llm-finetuning guard"
HOOK_TIMEOUT_S = 60  # hooks/hooks.json's timeout: past it Claude Code lets the call through
# The deadline denies before that timeout, whatever LLM_FINETUNING_GUARD_DEADLINE_S asks for.
DEADLINE_S = min(float(os.environ.get("LLM_FINETUNING_GUARD_DEADLINE_S") or 45), HOOK_TIMEOUT_S - 10)
FILE_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
# Words whose presence in a call (also hidden in escapes, base64 or concatenated literals) means it may touch
# what the guard protects: then a construct the guard cannot judge, or an internal error, denies the call.
PROTECTED_WORDS = re.compile(
    r"records|review|seal|inspection|baseline\.json|manifest\.json|grpo_config|launch\.sh|sbatch|accelerate|"
    r"\btrl\b|grpo|trainer|torchrun|deepspeed|llm_finetuning|llm-finetuning|finetune|hooks|guard|"
    r"disableAllHooks|CLAUDE_PLUGIN_ROOT|\.claude\b|\bclaude\b", re.I)
RECORD_MARKER = re.compile(r'"format"\s*:\s*"llm-finetuning/')
RECORDS_API = re.compile(r"llm_finetuning\.records|from\s+llm_finetuning\s+import\s+[^\n]*\brecords\b|"
                         r"llm_finetuning\.commands\.review")
# The package's record-writing functions, as `integrity.writes_records` marks them where they are defined.
RECORD_WRITERS = re.compile(r"\b(" + "|".join(sorted(integrity.RECORD_WRITERS if integrity else ("seal",))) + r")\b")
REVIEW = re.compile(r"finetune['\"]?\s*,?\s*['\"]?review\b|llm_finetuning(?:\.cli)?['\"]?\s*,?\s*['\"]?review\b|"
                    r"\brun_review\b")
# Code that trains a policy itself instead of through `finetune launch`.
TRAINER_CODE = re.compile(r"\b(?:Async)?(?:GRPO|RLOO|PPO|OnlineDPO)Trainer\b|llm_finetuning\.launch\.trainer|"
                          r"from\s+llm_finetuning\.launch\s+import\s+[^\n]*\btrainer\b|\btrl\.scripts\b|\btrl\.cli\b")
TRAINER_COMMAND = re.compile(r"\btrl\s+(?!env\b|vllm-serve\b|-)[a-z_]+|(?:-m\s+)?trl\.(?:scripts|cli)\b|"
                             r"llm_finetuning\.launch\.trainer")
DYNAMIC_IMPORT = re.compile(r"\bimportlib\b|__import__|\brequire\s*\(\s*[^'\"\s)]|\bimport\s*\(\s*[^'\"\s)]")
DISABLE_GUARD = re.compile(r"disableAllHooks|\"llm-finetuning@[^\"]*\"\s*:\s*false")
BRIEF_LINE = re.compile(rb"^brief:\s*\d", re.MULTILINE)

SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "\n", "|&", ";;", ";;&", ";&"}
WRAPPERS = {"env", "sudo", "nohup", "setsid", "time", "exec", "nice", "command", "stdbuf", "timeout", "srun", "uv",
            "run", "xargs", "unbuffer", "builtin", "doas", "ionice", "chronic", "flock", "caffeinate"}
KEYWORDS = {"{", "}", "then", "do", "else", "elif", "if", "while", "until", "!", "fi", "done", "esac", "function"}
NOT_A_LAUNCH = {"--plan", "--help", "-h"}  # `finetune launch RUN_DIR --plan` only prints what it would run
RUN_FILES = ("launch.sh", "sbatch.sh", "grpo_config.yaml", "accelerate.yaml")
RUNNERS = {"bash", "sh", "zsh", "source", ".", "sbatch", "srun", "trl", "accelerate", "torchrun", "deepspeed",
           "python", "python3"}
SHELLS = {"bash", "sh", "zsh", "dash", "ksh"}
STDIN_SHELLS = {"at", "batch"}  # run the shell commands they read on stdin, later
INTERPRETERS = {"python", "python3", "perl", "ruby", "node", "php", "awk", "gawk", "mawk", "jshell", "lua", "Rscript",
                "deno", "bun", "tclsh", "osascript"}
AWKS = {"awk", "gawk", "mawk", "nawk"}
LAUNCHERS = {"accelerate", "torchrun", "deepspeed"}  # start a Python script or module in several processes
# Programs that only read the paths they are given (a redirect of their output is judged on its own).
READERS = {"cat", "head", "tail", "less", "more", "ls", "stat", "wc", "grep", "egrep", "fgrep", "rg", "jq", "file",
           "sha256sum", "sha1sum", "md5sum", "b2sum", "diff", "cmp", "du", "tree", "realpath", "readlink", "basename",
           "dirname", "echo", "printf", "test", "[", "true", "false", "cut", "tr", "nl", "od", "xxd", "hexdump",
           "column", "bat", "view", "pwd", "which", "type", "cd", "for", "case", "select", "in", ":", "sleep", "date",
           "export", "local", "declare", "readonly", "set", "shift", "unset", "wait", "return", "exit", "read"}
# Programs that write what their arguments name; with arguments the shell computes they are not judged.
WRITERS = {"rm", "mv", "cp", "tee", "dd", "truncate", "install", "ln", "sed", "chmod", "chown", "touch", "rsync",
           "tar", "unzip", "shred", "unlink", "rmdir", "sponge", "patch", "find", "split", "csplit", "zip", "gzip",
           "gunzip", "bzip2", "xz", "7z", "ed", "ex", "vi", "vim", "nano", "scp"}
GIT_WRITERS = {"checkout", "restore", "apply", "am", "rm", "mv", "reset", "stash", "switch", "merge", "pull",
               "cherry-pick", "revert", "clean"}
GIT_READERS = {"status", "diff", "log", "show", "ls-files", "blame", "grep", "rev-parse", "describe", "shortlog"}
COPIERS = {"cp", "ln", "install", "rsync", "scp"}  # read their sources, write their destination
SKIP_DIRS = {"node_modules", "__pycache__", ".venv", "venv", ".git", "site-packages", ".tox", ".mypy_cache",
             ".ruff_cache", ".pytest_cache"}
GLOB_BUDGET = 20000  # directory entries one call may list to expand globs and search folders
FIX_LAUNCH = "run `finetune gate BRIEF`, follow its fixes, then `finetune render BRIEF -o RUN_DIR`, and launch that RUN_DIR"
BROKER_LAUNCH = "mcp__plugin_llm-finetuning_finetune__launch"  # the broker's tool (docs/claude-code.md, "The broker")
FIX_BROKER_LAUNCH = (f"launch through the plugin's broker: call the `{BROKER_LAUNCH}` tool with "
                     '{"run_dir": "RUN_DIR"}; it verifies the run and starts it detached, outside the sandbox')
FIX_TRAIN = ("run `finetune gate BRIEF` and follow its fixes, then `finetune render BRIEF -o RUN_DIR` and "
             "`finetune launch RUN_DIR --detach`")
WHY_RECORDS = ("Records are written only by `finetune baseline`, `finetune inspect` and `finetune calibrate-judge`, "
               "and an inspection is sealed only by a person running `finetune review` in their own terminal; "
               "the gate trusts them because no agent edits them")
ASK_PERSON = ("ask the person: if the record is wrong or stale, `finetune inspect BRIEF` (or `finetune baseline BRIEF`) "
              "makes a new one, and the person reviews it with `finetune review RECORD` in their own terminal")
WHY_GUARD = ("The llm-finetuning guard, its hooks and the settings that enable it are changed only by the person, "
             "never by the agent it guards")
FIX_GUARD = "ask the person to change it themselves if they mean to"
WHY_UNJUDGED = ("the guard reads command lines and cannot know what the shell or the program will compute at run "
                "time, so it denies rather than guess")
FIX_UNJUDGED = ("write the command with literal paths and program names (no variables, `$(...)`, backticks, globs, "
                "braces, `eval` or text piped into a shell), use the Write or Edit tool for a file, or ask the person "
                "to run it in their own terminal")
WHY_TRAIN = ("a model trained this way has no run manifest, so no gate verdict stands behind it, and `finetune eval` "
             "and `finetune export` say so")


class Denied(Exception):
    """The call is denied; the message says why and what to do."""


def deny_training(what: str) -> Denied:
    return Denied(f"{what} trains a model outside `finetune launch`: {WHY_TRAIN}. Fix: {FIX_TRAIN}")


# --- what the guard protects -------------------------------------------------------------------------------

_brief_dirs: dict[Path, bool] = {}


def regular_file(path: Path) -> bool:
    """A plain file (a FIFO named x.yaml or x.json would block the read)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def holds_a_brief(folder: Path) -> bool:
    """Whether `folder` has a brief (a YAML file with a top-level `brief: N`)."""
    if folder not in _brief_dirs:
        found = False
        try:
            names = [n for n in os.listdir(folder) if n.endswith((".yaml", ".yml"))]
        except OSError:
            names = []
        for name in names[:50]:
            if not regular_file(folder / name):
                continue
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
    if path.suffix != ".json" or not regular_file(path):
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(262144)
    except OSError:
        return False
    return RECORD_MARKER.search(head.decode("utf-8", "replace")) is not None


def is_run_dir(folder: Path) -> bool:
    return any(os.path.isfile(folder / name) for name in ("manifest.json", "grpo_config.yaml", "launch.sh"))


def guard_file(path: Path) -> str | None:
    """Why writing `path` would switch the guard off, or None: the plugin's own hooks and manifest, a program
    the guard runs through (`sh`, `python3`) in a folder on its PATH, a Claude Code settings file."""
    for folder in (PLUGIN_ROOT / "hooks", PLUGIN_ROOT / ".claude-plugin"):
        if path == folder or folder in path.parents:
            return f"{path} is part of the llm-finetuning guard ({folder}){GUARD_REASON}"
    if path in GUARD_IMPORTS:
        return f"{path} is code the llm-finetuning guard imports{GUARD_REASON}"
    if path.parent.name == ".claude" and path.name.startswith("settings") and path.suffix == ".json":
        return f"{path} holds Claude Code settings, which can switch hooks and plugins off{GUARD_REASON}"
    if re.fullmatch(r"python[0-9.]*|sh|env", path.name) and str(path.parent) in path_dirs():
        return f"{path} is a program the guard runs through (it is on the guard's PATH){GUARD_REASON}"
    return None


GUARD_REASON = ", and the guard depends on it"  # ends every reason guard_file gives
# The package's code the guard runs, from the plugin's own src/ (the modules of the package it imported).
GUARD_IMPORTS = frozenset(Path(m.__file__).resolve() for name, m in sorted(sys.modules.items())
                          if name.split(".")[0] == "llm_finetuning" and getattr(m, "__file__", None))


@functools.cache
def path_dirs() -> frozenset[str]:
    """The folders on the guard's own PATH, resolved."""
    return frozenset(os.path.realpath(d) for d in os.environ.get("PATH", "").split(os.pathsep) if d)


def protected(path: Path) -> str | None:
    """Why `path` may not be written, moved or deleted by the agent; None when it may."""
    for folder in (path, *path.parents):
        if folder.name == "records" and holds_a_brief(folder.parent):
            if folder == path:
                return f"{path} is the records folder of the brief beside it"
            return f"{path} is in {folder}, the records folder of the brief beside it"
    if is_record_file(path):
        return f"{path} is an llm-finetuning record"
    if path.name in RENDERED and regular_file(path.parent / "manifest.json"):
        return f"{path} is a rendered file of the run directory {path.parent}{RUN_REASON}"
    return guard_file(path)


RENDERED = {"manifest.json", *RUN_FILES, "rewards_entry.py"}  # what manifest.json binds in a run directory
RUN_REASON = ", bound by sha256 to the gate's verdict"  # ends the reason protected gives for them


class TooLarge(Exception):
    """Searching a folder or expanding a glob would list more entries than GLOB_BUDGET allows."""


class Budget:
    """Directory entries the guard may still list for this call."""

    def __init__(self, entries: int = GLOB_BUDGET) -> None:
        self.left = entries

    def spend(self, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise TooLarge()


def protected_inside(folder: Path, budget: Budget) -> str | None:
    """A protected records folder or record inside `folder` (deleting or moving it would take that along).
    Raises TooLarge when the folder is too large to search."""
    if not folder.is_dir() or folder.name in SKIP_DIRS:
        return None
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        if here.name == "records" and holds_a_brief(here.parent):
            return f"{folder} holds {here}, the records folder of a brief"
        if (reason := guard_file(here)) is not None:
            return reason
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        budget.spend(len(files) + len(dirs))
        for name in files:
            if name.endswith(".json") and is_record_file(here / name):
                return f"{folder} holds the record {here / name}"
    return None


def expand_glob(here: Path, pattern: str, budget: Budget) -> list[Path]:
    """The paths an unquoted shell glob names (bash's rules: no match leaves the word as it is), listing at most
    the budget's entries. Raises TooLarge past it."""
    pattern = os.path.expanduser(pattern)
    current = [Path("/") if pattern.startswith("/") else here]
    for part in [p for p in pattern.split("/") if p]:
        found: list[Path] = []
        for base in current:
            if not any(ch in part for ch in "*?["):
                found.append(base / part)
                continue
            try:
                with os.scandir(base) as entries:
                    for entry in entries:
                        budget.spend()
                        if entry.name.startswith(".") and not part.startswith("."):
                            continue
                        if fnmatch.fnmatchcase(entry.name, part):
                            found.append(base / entry.name)
            except (NotADirectoryError, FileNotFoundError, PermissionError):
                continue
        current = found
    matches = [p.resolve() for p in current if os.path.lexists(p)]
    return matches or [(here / pattern).resolve()]


_guarded: dict[Path, str | None] = {}


def guarded_place(here: Path) -> str | None:
    """Why writes from `here` need judging: it is in or beside a brief's records or a run directory, or one
    lies directly inside it; None when neither is near."""
    if here not in _guarded:
        reason = None
        for folder in (here, *list(here.parents)[:8]):
            if folder.name == "records" and holds_a_brief(folder.parent):
                reason = f"{folder} is a brief's records folder"
            elif os.path.isdir(folder / "records") and holds_a_brief(folder):
                reason = f"{folder} holds a brief's records"
            elif is_run_dir(folder):
                reason = f"{folder} is a run directory"
            if reason:
                break
        if reason is None:
            try:
                children = [here / n for n in sorted(os.listdir(here))[:200] if n not in SKIP_DIRS]
            except OSError:
                children = []
            for child in children:
                if os.path.isdir(child / "records") and holds_a_brief(child):
                    reason = f"{child} holds a brief's records"
                elif os.path.isdir(child) and is_run_dir(child):
                    reason = f"{child} is a run directory"
                if reason:
                    break
        _guarded[here] = reason
    return _guarded[here]


# --- shell parsing ------------------------------------------------------------------------------------------


class Word(str):
    """A shell word as the shell passes it (quotes removed, `$'...'` decoded), with the constructs that make its
    value known only at run time (`dynamic`) and whether it holds an unquoted glob character."""

    dynamic: tuple[str, ...] = ()
    globbed: bool = False

    def __new__(cls, text: str, dynamic: tuple[str, ...] = (), globbed: bool = False) -> Word:
        word = super().__new__(cls, text)
        word.dynamic, word.globbed = dynamic, globbed
        return word


OPERATORS = ("&>>", "<<<", "<<-", ";;&", ";;", ";&", "&&", "||", "|&", ">>", "<<", ">|", "<>", ">&", "<&", "&>",
             ";", "&", "|", "(", ")", "<", ">", "\n")
BRACES = re.compile(r"\{[^{}\s]*(?:,|\.\.)[^{}\s]*\}")
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "v": "\v",
           "\\": "\\", "'": "'", '"': '"', "?": "?"}
HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
# `"$(cat <<'EOF' ... EOF)"`, the usual way to pass a commit message: literal text, judged as that text.
CAT_HEREDOC = re.compile(r"\$\(\s*cat\s+<<-?\s*(['\"])(\w+)\1[ \t]*\n(.*?)\n[ \t]*\2[ \t]*\n[ \t]*\)", re.S)


def literal_cat_heredocs(command: str) -> str:
    r"""`$(cat <<'EOF' ... EOF)` (a quoted delimiter: no expansion inside) replaced by its text, escaped so that it
    stays one literal word inside double quotes."""
    def text(match: re.Match[str]) -> str:
        return re.sub(r'(["$`\\])', r"\\\1", match.group(3).rstrip("\n"))

    return CAT_HEREDOC.sub(text, command)


def split_heredocs(command: str) -> tuple[str, list[tuple[str, bool]]]:
    """The command without its here-document bodies, and the bodies in order (text, expanded by the shell:
    the delimiter was not quoted)."""
    lines = command.split("\n")
    kept: list[str] = []
    bodies: list[tuple[str, bool]] = []
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
            bodies.append(("\n".join(body), not match.group(1)))
    return "\n".join(kept), bodies


def closing(text: str, i: int, open_: str = "(", close: str = ")") -> int:
    """The index after the bracket matching text[i] (quotes and escapes skipped), or -1."""
    depth, j = 0, i
    while j < len(text):
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "'" :
            j = text.find("'", j + 1)
            if j < 0:
                return -1
        elif ch == '"':
            k = j + 1
            while k < len(text) and text[k] != '"':
                k += 2 if text[k] == "\\" else 1
            j = k
        elif ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return -1


def expansion(text: str, i: int) -> tuple[int, str | None]:
    """(end, kind) of the expansion starting at text[i] (`$...` or a backtick); kind None for a lone `$`."""
    if text[i] == "`":
        j = i + 1
        while j < len(text) and text[j] != "`":
            j += 2 if text[j] == "\\" else 1
        return (j + 1, "backticks") if j < len(text) else (-1, "backticks")
    nxt = text[i + 1:i + 2]
    if nxt == "(":
        kind = "arithmetic expansion" if text[i + 2:i + 3] == "(" else "command substitution"
        return closing(text, i + 1), kind
    if nxt == "{":
        return closing(text, i + 1, "{", "}"), "a variable"
    if m := re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]", text[i + 1:]):
        return i + 1 + m.end(), "a variable"
    return i + 1, None


def ansi_c(text: str, i: int) -> tuple[int, str]:
    """(end, decoded text) of the `$'...'` string whose body starts at text[i]; end -1 when it does not close."""
    out: list[str] = []
    j = i
    while j < len(text) and text[j] != "'":
        if text[j] != "\\" or j + 1 >= len(text):
            out.append(text[j])
            j += 1
            continue
        ch = text[j + 1]
        if m := re.match(r"x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{1,4})|U([0-9a-fA-F]{1,8})|([0-7]{1,3})", text[j + 1:]):
            digits = next(g for g in m.groups() if g)
            out.append(chr(int(digits, 8 if m.group(4) else 16) % 0x110000))
            j += 1 + m.end()
        elif ch == "c" and j + 2 < len(text):
            out.append(chr(ord(text[j + 2]) & 0x1F))
            j += 3
        else:
            out.append(ESCAPES.get(ch, "\\" + ch))
            j += 2
    return (j + 1 if j < len(text) else -1), "".join(out)


def tokens(command: str) -> list[str] | None:
    """The command's words (Word) and operators (str), as bash reads them; None when it cannot be read
    (unbalanced quotes or brackets)."""
    out: list[str] = []
    buf: list[str] = []
    unquoted: list[str] = []
    dynamic: list[str] = []
    started = False

    def flush() -> None:
        nonlocal started
        if started:
            raw = "".join(unquoted)
            kinds = tuple(dynamic) + (("brace expansion",) if BRACES.search(raw) else ())
            out.append(Word("".join(buf), kinds, any(ch in raw for ch in "*?[")))
        buf.clear()
        unquoted.clear()
        dynamic.clear()
        started = False

    i, n = 0, len(command)
    while i < n:
        ch = command[i]
        if ch in " \t\r":
            flush()
            i += 1
        elif ch == "\\":
            if command[i + 1:i + 2] != "\n":
                buf.append(command[i + 1:i + 2])
                started = True
            i += 2
        elif ch == "#" and not started:
            j = command.find("\n", i)
            i = n if j < 0 else j
        elif ch == "'":
            j = command.find("'", i + 1)
            if j < 0:
                return None
            buf.append(command[i + 1:j])
            started, i = True, j + 1
        elif ch == "$" and command[i + 1:i + 2] == "'":
            j, text = ansi_c(command, i + 2)
            if j < 0:
                return None
            buf.append(text)
            started, i = True, j
        elif ch == '"':
            j = i + 1
            while j < n and command[j] != '"':
                c = command[j]
                if c == "\\" and j + 1 < n:
                    nxt = command[j + 1]
                    buf.append(nxt if nxt in '$`"\\' else "" if nxt == "\n" else c + nxt)
                    j += 2
                elif c in "$`":
                    end, kind = expansion(command, j)
                    if end < 0:
                        return None
                    buf.append(command[j:end])
                    if kind:
                        dynamic.append(kind)
                    j = end
                else:
                    buf.append(c)
                    j += 1
            if j >= n:
                return None
            started, i = True, j + 1
        elif ch in "$`":
            end, kind = expansion(command, i)
            if end < 0:
                return None
            buf.append(command[i:end])
            if kind:
                dynamic.append(kind)
            started, i = True, end
        elif ch in "<>" and command[i + 1:i + 2] == "(":
            end = closing(command, i + 1)
            if end < 0:
                return None
            buf.append(command[i:end])
            dynamic.append("process substitution")
            started, i = True, end
        elif op := next((o for o in OPERATORS if command.startswith(o, i)), None):
            fd = "".join(buf) if started and not dynamic and "".join(unquoted).isdigit() and op[0] in "<>" else ""
            if fd:
                buf.clear()
                unquoted.clear()
                started = False
            flush()
            out.append(fd + op)
            i += len(op)
        else:
            buf.append(ch)
            unquoted.append(ch)
            started = True
            i += 1
    flush()
    return out


class Segment:
    """One simple command: its words, the files its redirects write and read, what feeds its stdin."""

    def __init__(self, piped: bool) -> None:
        self.piped = piped  # stdin comes from the previous command of a pipeline
        self.words: list[Word] = []
        self.written: list[Word] = []
        self.read_from: list[Word] = []
        self.heredocs: list[tuple[str, bool]] = []


def segments(command: str, bodies: list[tuple[str, bool]]) -> list[Segment] | None:
    """The command's simple commands, or None when it cannot be read. Here-document bodies go to the command
    whose `<<` they follow."""
    toks = tokens(command)
    if toks is None:
        return None
    out = [Segment(False)]
    pending = iter(bodies)
    i = 0
    while i < len(toks):
        tok = toks[i]
        if not isinstance(tok, Word) and tok in SEPARATORS:
            out.append(Segment(tok in ("|", "|&")))
            i += 1
            continue
        if isinstance(tok, Word):
            out[-1].words.append(tok)
            i += 1
            continue
        op = tok.lstrip("0123456789")
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        target = nxt if isinstance(nxt, Word) else Word("")
        if op in ("<<", "<<-"):
            out[-1].heredocs.append(next(pending, ("", False)))
        elif op == "<<<":
            out[-1].heredocs.append((str(target), bool(target.dynamic)))
        elif op == "<":
            out[-1].read_from.append(target)
        elif op == "<&" or (op == ">&" and (target.isdigit() or target == "-")):
            pass  # <&3, 2>&1, >&2: a file descriptor, not a file
        else:
            out[-1].written.append(target)
        i += 2
    return [s for s in out if s.words or s.written or s.heredocs]


def strip_prefix(words: list[Word]) -> list[Word]:
    """Drop `VAR=value` assignments, shell keywords and wrappers such as env, sudo, nohup, timeout 60."""
    i = 0
    while i < len(words):
        tok, before = words[i], words[i - 1] if i else ""
        assignment = "=" in tok and not tok.startswith("-") and tok.split("=", 1)[0].isidentifier()
        wrapper_option = tok.startswith("-") and os.path.basename(before) in WRAPPERS
        duration = before == "timeout" and tok[:1].isdigit()
        if not (assignment or os.path.basename(tok) in WRAPPERS or tok in KEYWORDS or wrapper_option or duration):
            break
        i += 1
    return words[i:]


def program(words: Sequence[str]) -> str:
    name = os.path.basename(words[0]) if words else ""
    return "python" if re.fullmatch(r"python[0-9.]*", name) else name


def resolve(here: Path, word: str) -> Path:
    return (here / os.path.expanduser(word)).resolve()


def read_text(path: Path, limit: int = 1 << 20) -> str:
    if not regular_file(path):
        return ""
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


# --- what text hides ----------------------------------------------------------------------------------------

QUOTE_JOIN = re.compile(r"""(['"])\s*(?:\+|\.|,|\s)\s*(['"])""")


def revealed(text: str) -> str:
    """`text` and what it spells when pieces are put together: concatenated literals ('rec' + 'ords'), every
    quoted literal joined, escapes (\\x72, \\162, \\u0072), chr()/fromCharCode codes, base64 and hex literals,
    the text reversed. Words searched in this view cannot hide by being split or encoded."""
    text = text[:200000]
    views = [text, QUOTE_JOIN.sub("", text)]
    views.append("".join(a or b for a, b in re.findall(r"'([^'\n]*)'|\"([^\"\n]*)\"", text)))
    views.append(re.sub(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|([0-7]{3}))",
                        lambda m: chr(int(m.group(1) or m.group(2) or m.group(3), 8 if m.group(3) else 16)), text))
    codes = re.findall(r"\b(?:chr|fromCharCode|char)\s*\(\s*([0-9, ]+)\)", text)
    codes += re.findall(r"\[\s*((?:\d{2,3}\s*,\s*){3,}\d{2,3})\s*\]", text)  # [114, 101, 99, ...]
    views.append("".join(chr(int(c) % 0x110000) for group in codes for c in group.split(",") if c.strip().isdigit()))

    for blob in re.findall(r"[A-Za-z0-9+/_-]{12,}={0,2}", text):
        for decode in (base64.b64decode, base64.urlsafe_b64decode, bytes.fromhex):
            try:
                views.append(decode(blob + "=" * (-len(blob) % 4) if decode is not bytes.fromhex else blob)
                             .decode("utf-8", "replace"))
            except (ValueError, binascii.Error):
                continue
    views.append(text[::-1])
    return "\n".join(views)


def hidden_words(text: str) -> set[str]:
    """Protected words that `text` spells only when its pieces are put together or decoded."""
    plain = {m.lower() for m in PROTECTED_WORDS.findall(text)}
    return {m.lower() for m in PROTECTED_WORDS.findall(revealed(text))} - plain


# --- the rules ----------------------------------------------------------------------------------------------


def check_code(code: str, where: str, trainer: bool = True) -> None:
    """Text that will run: no `finetune review`, no records API, no trainer of its own (`trainer`: code, not a
    command's arguments such as a commit message), also when spelled in pieces or encoded."""
    view = revealed(code)
    if REVIEW.search(view):
        raise Denied(f"{where} runs `finetune review`. Only the person signs an inspection: they run `finetune review` "
                     "in their own terminal after reading every sample. Fix: ask the person to run "
                     "`finetune review RECORD` themselves, and wait for them")
    if RECORDS_API.search(view):
        raise Denied(f"{where} imports the llm_finetuning records API, which can write and re-seal records. "
                     f"{WHY_RECORDS}. Fix: use the `finetune` verbs; {ASK_PERSON}")
    if trainer and TRAINER_CODE.search(view):
        raise deny_training(where)
    if DYNAMIC_IMPORT.search(code) and re.search(r"llm_finetuning|trl|records", view):
        raise Denied(f"{where} imports a module whose name it computes, beside llm_finetuning or trl names: "
                     f"{WHY_UNJUDGED}. Fix: {FIX_UNJUDGED}")


MOVES = re.compile(r"rmtree|rename|replace|move|remove|unlink|rmdir|copytree|extractall|rm\s+-|unpack_archive")


def code_mentions_protected(code: str, here: Path, budget: Budget) -> str | None:
    """A protected path named in interpreter code (quoted strings and path-like words); for code that deletes or
    moves, also a folder that holds one."""
    moves = MOVES.search(code) is not None
    for word in set(re.findall(r"""["']([^"'\n]{1,400})["']|([\w./~-]*(?:records|hooks)[\w./-]*)""", code)):
        text = word[0] or word[1]
        if not text or "\0" in text:
            continue
        path = resolve(here, text)
        try:
            reason = protected(path) or (protected_inside(path, budget) if moves else None)
        except TooLarge:
            reason = f"{path}, a folder the code may delete or move, is too large to search for records in time"
        if reason:
            return reason
    return None


class Call:
    """One Bash call being judged: its full text, where it started, and what it may write so far."""

    def __init__(self, command: str, here: Path) -> None:
        self.command = command
        self.start = here
        self.budget = Budget()
        self.writes: list[tuple[str, str, str]] = []  # (reason, why, fix)
        self.launches: list[Path] = []
        self._touches: str | None = None

    def touches(self) -> str:
        """The first protected word the call names (also hidden in escapes, pieces or base64), or ''."""
        if self._touches is None:
            m = PROTECTED_WORDS.search(self.command) or PROTECTED_WORDS.search(revealed(self.command))
            self._touches = m.group(0) if m else ""
        return self._touches

    def cannot_judge(self, what: str, here: Path, writes: bool) -> None:
        """Deny `what` (a construct the guard cannot judge) when the call names a protected word or, for a
        construct in a place that writes, when records or a run directory lie where it runs."""
        word = self.touches()
        place = guarded_place(here) if writes and not word else None
        if word or place:
            near = f"it names `{word}`" if word else place
            raise Denied(f"the guard cannot judge {what}, and {near}: {WHY_UNJUDGED}. Fix: {FIX_UNJUDGED}")

    def write(self, reason: str | None) -> None:
        if reason is None:
            return
        if reason.endswith(GUARD_REASON):
            self.writes.append((reason, WHY_GUARD, FIX_GUARD))
        elif reason.endswith(RUN_REASON):
            self.writes.append((reason, "A run directory is written only by `finetune render`, after a passing gate",
                                f"change the brief and {FIX_LAUNCH}"))
        else:
            self.writes.append((reason, WHY_RECORDS, f"read records with `cat` or `jq` only; {ASK_PERSON}"))

    def written_path(self, word: Word, here: Path, what: str) -> None:
        """Judge a path the command writes, moves or deletes (a redirect target, a writer's argument)."""
        if word.dynamic:
            self.cannot_judge(f"{what} `{word}`, which the shell computes ({word.dynamic[0]})", here, writes=True)
            return
        if word.globbed:
            try:
                paths = expand_glob(here, word, self.budget)
            except TooLarge:
                self.cannot_judge(f"{what} `{word}`: the glob names more entries than it can list in time", here,
                                  writes=True)
                return
        else:
            paths = [resolve(here, word)]
        for path in paths:
            self.write(protected(path))


def check_bash(command: str, here: Path, call: Call | None = None, depth: int = 0) -> list[Path]:
    """Deny (raise Denied) what the command may not do; return the run directories it would launch."""
    call = call or Call(command, here)
    if RECORD_MARKER.search(command):
        raise Denied(f"the command writes llm-finetuning record JSON by hand. {WHY_RECORDS}. Fix: {ASK_PERSON}")
    if DISABLE_GUARD.search(command):
        raise Denied(f"the command would switch the guard off (`disableAllHooks` or the plugin disabled in "
                     f"settings). {WHY_GUARD}. Fix: {FIX_GUARD}")
    text, bodies = split_heredocs(literal_cat_heredocs(command))
    segs = segments(text, bodies)
    if segs is None:
        if call.touches():
            raise Denied("the command cannot be parsed (unbalanced quotes or brackets), so what it does to records or "
                         "launches cannot be checked. Fix: write it as plain commands with balanced quotes")
        return []
    readers: list[tuple[str, list[Word], Path]] = []  # what they list matters only to an `xargs` that writes
    xargs_writer = ""
    for n, seg in enumerate(segs):
        for target in seg.written:
            call.written_path(target, here, "a redirect to")
        fed_by_xargs = any(os.path.basename(w) == "xargs" for w in seg.words[:3])
        words = strip_prefix(seg.words)
        if not words:
            continue
        if words[0].dynamic:
            call.cannot_judge(f"a command name the shell computes (`{words[0]}`, {words[0].dynamic[0]})", here,
                              writes=True)
        prog = program(words)
        args = words[1:]
        if prog == "cd":
            here = change_dir(call, here, args)
            continue
        reader = is_reader(prog, words)
        if fed_by_xargs and not reader and prog in WRITERS | SHELLS | INTERPRETERS:
            xargs_writer = prog  # it writes, or runs code, with names read at run time
        if not reader:
            check_code(" ".join(words), "The command", trainer=False)
            dynamic = next((w for w in args if w.dynamic), None)
            if dynamic is not None:
                call.cannot_judge(f"`{prog}` with an argument the shell computes (`{dynamic}`, {dynamic.dynamic[0]})",
                                  here, writes=prog in WRITERS | SHELLS | INTERPRETERS | LAUNCHERS | {"eval", "finetune",
                                                                                                      "make", "xargs"})
        if prog == "eval":
            if depth >= 3:
                call.cannot_judge("`eval` nested this deep", here, writes=True)
            else:
                call.launches += check_bash(" ".join(args), here, call, depth + 1)
            continue
        if prog in SHELLS | INTERPRETERS | STDIN_SHELLS or prog in ("source", "."):
            judge_interpreter(call, prog, words, seg, segs[n - 1] if seg.piped and n else None, here, depth)
        remote = remote_command(prog, words, seg.words)
        if remote is not None:
            if depth >= 3:
                call.cannot_judge(f"`{prog}` nested this deep", here, writes=True)
            else:
                call.launches += check_bash(remote, here, call, depth + 1)
        if prog == "python" and args[:2] in (["-m", "llm_finetuning.cli"], ["-m", "llm_finetuning"]):
            prog, args = "finetune", args[2:]
        if prog == "finetune":
            if args[:1] == ["launch"] and not NOT_A_LAUNCH & set(args):
                positional = [a for a in args[1:] if not a.startswith("-")]
                if positional:
                    call.launches.append(resolve(here, positional[0]))
            continue  # the other verbs write records only as their contract says (baseline, inspect, ...)
        judge_training(call, prog, words, here)
        call.launches += run_files(prog, words, here)
        if prog == "claude" and len(args) > 1 and args[0] in ("plugin", "plugins") and \
                (args[1] in ("disable", "uninstall", "remove", "rm") or args[1:3] == ["marketplace", "remove"]):
            if not any(w.dynamic for w in args) and all("llm-finetuning" not in w for w in args[2:]) and args[2:]:
                continue  # another plugin, named literally
            raise Denied(f"`claude {' '.join(args[:2])}` would switch the llm-finetuning guard off. {WHY_GUARD}. "
                         f"Fix: {FIX_GUARD}")
        if prog == "make":
            judge_makefile(call, words, here)
            continue
        if prog in ("tar", "unzip", "bsdtar"):
            judge_archive(call, prog, words, here)
        if prog == "patch" or (prog == "git" and args[:1] in (["apply"], ["am"])):
            judge_patch(call, prog, words, seg, here)
        if prog in AWKS and not re.search(r">|system|getline", next((a for a in args if not a.startswith("-")), "")):
            pass  # awk that only prints: its file operands are read
        elif prog in INTERPRETERS:
            code = " ".join(args) + "\n" + "\n".join(body for body, _ in seg.heredocs)
            call.write(code_mentions_protected(code, here, call.budget))
        elif reader:
            readers.append((prog, words, here))
        elif prog not in SHELLS | LAUNCHERS | RUNNERS:  # a runner's code and run files were judged above
            call.write(mentioned_protected(call, prog, words, here))
    if xargs_writer and any(names_protected(call, *reader) for reader in readers):
        call.write("it lists a records folder or record and hands the names to `xargs` with a program that writes")
    elif xargs_writer:
        call.cannot_judge(f"`xargs` handing names it reads at run time to `{xargs_writer}`", here, writes=True)
    if depth == 0 and call.writes:
        reason, why, fix = call.writes[0]
        what = "a record" if why == WHY_RECORDS else "the guard" if why == WHY_GUARD else "a rendered run"
        raise Denied(f"the command would write, move or delete {what}: "
                     f"{reason}. {why}. Fix: {fix}")
    return call.launches


def change_dir(call: Call, here: Path, args: list[Word]) -> Path:
    """Where `cd ARG` leaves the shell (a glob: its first match)."""
    if not args or args[0] == "-":
        return here
    target = args[0]
    if target.dynamic:
        call.cannot_judge(f"`cd {target}`, a folder the shell computes ({target.dynamic[0]})", here, writes=True)
        return here
    if target.globbed:
        try:
            return expand_glob(here, target, call.budget)[0]
        except TooLarge:
            call.cannot_judge(f"`cd {target}`: the glob names more entries than it can list in time", here, writes=True)
    return resolve(here, target)


def is_reader(prog: str, words: Sequence[str]) -> bool:
    if prog == "git":
        return len(words) > 1 and words[1] in GIT_READERS
    if prog in ("sed", "perl"):
        return not any(w.startswith("-i") or w in ("--in-place",) for w in words[1:])
    if prog == "find":
        return not {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf", "-fls"} & set(words)
    return prog in READERS


def remote_command(prog: str, words: list[Word], unwrapped: list[Word]) -> str | None:
    """The command line `ssh HOST CMD...` or `env -S STRING` runs, if any (`unwrapped`: the words before
    wrappers such as env were stripped)."""
    at = next((i for i, w in enumerate(unwrapped[:-1]) if w in ("-S", "--split-string") and
               any(os.path.basename(v) == "env" for v in unwrapped[:i])), None)
    if at is not None:
        return " ".join(unwrapped[at + 1:])
    if prog == "ssh":
        rest = [str(w) for w in words[1:]]
        i = 0
        while i < len(rest) and rest[i].startswith("-"):
            i += 2 if re.fullmatch(r"-[bcDEeFIiJLlmOopQRSWw]", rest[i]) else 1
        return " ".join(rest[i + 1:]) or None
    return None


def shell_command_string(words: list[Word]) -> Word | None:
    """The string of `bash -c STRING` (also `-lc`, `-ec`, `-xc`...)."""
    for i, word in enumerate(words[1:], 1):
        if re.fullmatch(r"-[a-zA-Z]*c[a-zA-Z]*", word) and not word.startswith("--"):
            return words[i + 1] if i + 1 < len(words) else Word("")
        if not word.startswith("-"):
            return None
    return None


def code_option(words: list[Word]) -> Word | None:
    """The code of `python -c CODE`, `perl -e CODE`, `node -e CODE`, `ruby -e CODE`; None for a script or stdin."""
    for i, word in enumerate(words[1:], 1):
        if re.fullmatch(r"-[a-zA-Z]*[ceE]|--eval|--command", word):
            return words[i + 1] if i + 1 < len(words) else Word("")
        if not word.startswith("-"):
            return None
    return None


def script_file(words: list[Word], here: Path) -> Path | None:
    """The script a shell or interpreter runs (`bash x.sh`, `python x.py`, `./x.sh`), if any."""
    prog = program(words)
    args = [w for w in words[1:] if not w.startswith("-")]
    if prog in SHELLS | INTERPRETERS | {"source", "."} and args and code_option(words) is None \
            and shell_command_string(words) is None and "-m" not in words:
        candidate = resolve(here, args[0])
    elif words and ("/" in words[0]) and prog not in READERS:
        candidate = resolve(here, words[0])
    else:
        return None
    return candidate if candidate.is_file() else None


def stdin_code(seg: Segment, before: Segment | None, here: Path) -> tuple[str, str] | None:
    """(where, code) that a shell or interpreter reads on stdin: a here-document, a `< FILE`, or the output of
    `echo`/`printf`/`cat FILE` before it in a pipeline; None when it reads nothing the guard can see; raises
    LookupError when it reads the output of another program."""
    if seg.heredocs:
        return "A here-document in the command", "\n".join(body for body, _ in seg.heredocs)
    if seg.read_from:
        return f"The file {seg.read_from[0]} fed to it", read_text(resolve(here, seg.read_from[0]))
    if before is None:
        return None
    words = strip_prefix(before.words)
    prog = program(words)
    if prog in ("echo", "printf"):
        return "The text piped into it", " ".join(w for w in words[1:] if not re.fullmatch(r"-[neE]+", w))
    if prog == "cat" and len(words) > 1:
        files = [resolve(here, w) for w in words[1:] if not w.startswith("-")]
        return f"The file {words[1]} piped into it", "\n".join(read_text(f) for f in files)
    raise LookupError(prog or "a subshell")


def judge_interpreter(call: Call, prog: str, words: list[Word], seg: Segment, before: Segment | None, here: Path,
                      depth: int) -> None:
    """The code a shell or interpreter runs: a `-c`/`-e` string, a script file, a here-document or piped text."""
    shell = prog in SHELLS | STDIN_SHELLS or prog in ("source", ".")
    string = shell_command_string(words) if prog in SHELLS else None
    if string is not None:
        if depth >= 3:
            call.cannot_judge(f"`{prog} -c` nested this deep", here, writes=True)
        else:
            call.launches += check_bash(string, here, call, depth + 1)
        return
    code = None if shell else code_option(words)
    if code is not None:
        judge_program_code(call, str(code), "The command", here)
        return
    script = script_file(words, here)
    if script is not None:
        if script.name in RUN_FILES and (script.parent / "manifest.json").is_file():
            return  # a rendered run file: the launch check verifies it against manifest.json
        text = read_text(script)
        if shell or (text.startswith("#!") and "sh" in text.split("\n", 1)[0] and "python" not in text.split("\n", 1)[0]):
            if depth >= 3:
                call.cannot_judge(f"the script {script}, nested this deep", here, writes=True)
            else:
                check_code(text, f"The script {script}")
                call.launches += check_bash(text, here, call, depth + 1)
        else:
            judge_program_code(call, text, f"The script {script}", here)
        return
    if "-m" in words:
        return  # a module (judged as training or a launch): what it reads on stdin is data, not code
    operands = [w for w in words[1:] if not w.startswith("-")]
    if operands and prog in AWKS:  # the program text, then the files it reads
        judge_program_code(call, operands[0], "The awk program", here)
        return
    if operands and prog not in STDIN_SHELLS:  # a script that does not exist yet: the call may write it first
        call.cannot_judge(f"`{prog} {operands[0]}`, a script that does not exist yet", here, writes=True)
        return
    try:
        fed = stdin_code(seg, before, here)
    except LookupError as exc:
        call.cannot_judge(f"text that `{exc}` pipes into `{prog}` at run time", here, writes=True)
        return
    if fed is None:
        return
    where, code_text = fed
    if seg.heredocs and any(expanded and re.search(r"\$|`", body) for body, expanded in seg.heredocs):
        call.cannot_judge(f"a here-document into `{prog}` with expansions the shell fills in", here, writes=True)
    if shell:
        check_code(code_text, where)
        if depth >= 3:
            call.cannot_judge(f"text piped into `{prog}`, nested this deep", here, writes=True)
        else:
            call.launches += check_bash(code_text, here, call, depth + 1)
    else:
        judge_program_code(call, code_text, where, here)


def judge_program_code(call: Call, code: str, where: str, here: Path) -> None:
    """Interpreter code (Python, Perl, Node, awk...): no review, records API or trainer; no protected path,
    named literally or built from pieces."""
    check_code(code, where)
    call.write(code_mentions_protected(code, here, call.budget))
    hidden = hidden_words(code)
    if hidden:
        raise Denied(f"{where} builds a protected name (`{sorted(hidden)[0]}`) from pieces or an encoding, so the guard "
                     f"cannot tell what it writes or runs: {WHY_UNJUDGED}. Fix: {FIX_UNJUDGED}")
    if CODE_WRITES.search(code) and CODE_INPUTS.search(code):
        call.cannot_judge(f"{where[0].lower()}{where[1:]}, which writes files it names from its environment, "
                          "arguments or input", here, writes=False)


# Interpreter code that writes or moves files, and code that takes names from outside its own text.
CODE_WRITES = re.compile(r"""open\s*\([^)]*['"][wax+]|write_(?:text|bytes)|writeFileSync|appendFile|\brename|\breplace\(|"""
                         r"""\bunlink|\bremove\(|rmtree|copyfile|shutil\.(?:copy|move)|open\s*\(\s*\w+\s*,\s*['"]?[>+]|"""
                         r"""print\s*\{?[^}\n]*>|\bsystem\s*\(""")
CODE_INPUTS = re.compile(r"os\.environ|getenv|process\.env|\$ENV\b|\bENV\[|ENVIRON|sys\.argv|@ARGV|\bARGV\b|"
                         r"process\.argv|\binput\s*\(|sys\.stdin|<STDIN>|argparse|click")


def names_protected(call: Call, prog: str, words: list[Word], here: Path) -> bool:
    """Whether a reader's arguments name something protected (a glob too large to list counts as yes)."""
    try:
        return mentioned_protected(call, prog, words, here, listing=True) is not None
    except TooLarge:
        return True


def mentioned_protected(call: Call, prog: str, words: list[Word], here: Path, listing: bool = False) -> str | None:
    """The first protected path the command's arguments name as something it may write, move or delete."""
    args = [w for w in words[1:] if w != "--"]
    if prog in COPIERS:
        return copied_over(call, prog, args, here)
    for arg in args:
        value = Word(arg.split("=", 1)[1], arg.dynamic, arg.globbed) \
            if "=" in arg and (arg.startswith("-") or arg.startswith("of=")) else arg
        if not value or value.startswith("-"):
            continue
        if value.globbed and not value.dynamic:
            try:
                paths = expand_glob(here, value, call.budget)
            except TooLarge:
                if listing:
                    raise
                call.cannot_judge(f"`{prog} {value}`: the glob names more entries than it can list in time", here,
                                  writes=True)
                continue
        else:
            paths = [resolve(here, value)]
        for path in paths:
            reason = protected(path)
            if reason is None and prog in ("rm", "mv", "rmdir", "find", "rsync", "git", "chmod", "chown", "shred"):
                try:
                    reason = protected_inside(path, call.budget)
                except TooLarge:
                    call.cannot_judge(f"`{prog} {value}`: the folder is too large to search for records in time",
                                      here, writes=True)
            if reason:
                return reason
    return None


def copied_over(call: Call, prog: str, args: list[Word], here: Path) -> str | None:
    """What a copy, link or install would overwrite or expose: a protected destination, a folder copied over one
    that holds records, a link to a record."""
    plain = [a for a in args if not a.startswith("-")]
    at = [str(a) for a in args].index("-t") + 1 if "-t" in args else 0
    if 0 < at < len(args):
        target, sources = args[at], [p for p in plain if p != args[at]]
    elif prog == "ln" and len(plain) == 1:
        target, sources = Word("."), plain
    else:
        target, sources = (plain[-1], plain[:-1]) if plain else (Word(""), [])
    if prog == "ln":
        for source in sources:
            if (reason := protected(resolve(here, source))) is not None:
                return f"{reason} (a link to it lets a later write reach it)"
    if not target:
        return None
    call.written_path(target, here, f"`{prog}` into")
    dest = resolve(here, target)
    for source in sources:
        src = resolve(here, source)
        if not src.is_dir():
            continue
        into = dest if source.endswith(("/", "/.")) or not dest.is_dir() else dest / src.name
        try:
            reason = protected(into) or protected_inside(into, call.budget)
        except TooLarge:
            call.cannot_judge(f"`{prog}` of the folder {source} over {target}, too large to search in time", here,
                              writes=True)
            continue
        if reason:
            return f"copying the folder {source} over it: {reason}"
    return None


def judge_archive(call: Call, prog: str, words: list[Word], here: Path) -> None:
    """`tar -x` / `unzip` over records: list the archive's members and judge where each lands."""
    args = [str(w) for w in words[1:]]
    if prog == "unzip":
        archive = next((a for a in args if not a.startswith("-")), "")
        dest = args[args.index("-d") + 1] if "-d" in args and args.index("-d") + 1 < len(args) else "."
    else:
        flags = "".join(a for a in args[:1] if not a.startswith("--")) + "".join(a for a in args if a.startswith("-"))
        if "x" not in flags.lstrip("-") and "--extract" not in args and "--get" not in args:
            return
        archive = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-f", "--file") or
                        (re.fullmatch(r"-?[a-zA-Z]*f", a) and not a.startswith("--"))), "")
        archive = archive or next((a.split("=", 1)[1] for a in args if a.startswith("--file=")), "")
        dest = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-C", "--directory")), "")
        dest = dest or next((a.split("=", 1)[1] for a in args if a.startswith("--directory=")), ".")
    root = resolve(here, dest)
    try:
        names = archive_members(resolve(here, archive)) if archive and archive != "-" else None
    except TooLarge:
        names = None
    if names is None:
        call.cannot_judge(f"`{prog}` of an archive it cannot list ({archive or 'stdin'})", root, writes=True)
        return
    for name in names:
        call.write(protected((root / name).resolve()))


# Lists an archive in a child interpreter, isolated like the guard and with every import at its start: the
# archive modules cost the guard ~20 ms of imports on every call, and archives are rare.
ARCHIVE_LISTER = """import json, sys, tarfile, zipfile, gzip, bz2
try:
    import lzma
except ImportError:
    pass
path, budget = sys.argv[1], int(sys.argv[2])
try:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    else:
        names = []
        with tarfile.open(path) as tf:
            for member in tf:
                names.append(member.name)
                if len(names) > budget:
                    print(json.dumps("too large")); sys.exit(0)
except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError):
    names = None
print(json.dumps(names))
"""


def archive_members(path: Path) -> list[str] | None:
    """The member names of a tar or zip archive (at most GLOB_BUDGET), or None when it cannot be read."""
    if not regular_file(path):
        return None
    code, out, _ = run_child([sys.executable, "-I", "-S", "-c", ARCHIVE_LISTER, str(path), str(GLOB_BUDGET)], 30)
    try:
        names = json.loads(out) if code == 0 else None
    except ValueError:
        return None
    if names == "too large":
        raise TooLarge()
    return [str(n) for n in names] if isinstance(names, list) else None


def run_child(argv: list[str], timeout: float) -> tuple[int, str, str]:
    """Run `argv` (an absolute program) with stdin from /dev/null; (exit code, stdout, stderr). What the guard needs
    of `subprocess`, whose imports would cost every call ~10 ms. TimeoutError past `timeout` (the child is killed)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        pid = os.posix_spawn(argv[0], argv, dict(os.environ), file_actions=[
            (os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2),
            (os.POSIX_SPAWN_CLOSE, out_r), (os.POSIX_SPAWN_CLOSE, err_r)])
    finally:
        for fd in (null, out_w, err_w):
            os.close(fd)
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    open_fds, deadline = [out_r, err_r], time.monotonic() + timeout
    try:
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise TimeoutError(f"{argv[0]} ran past {timeout:g} s")
            for fd in select.select(open_fds, [], [], left)[0]:
                data = os.read(fd, 1 << 16)
                if data:
                    chunks[fd].append(data)
                else:
                    open_fds.remove(fd)
    finally:
        for fd in (out_r, err_r):
            os.close(fd)
    status = os.waitpid(pid, 0)[1]
    return (os.waitstatus_to_exitcode(status), b"".join(chunks[out_r]).decode(errors="replace"),
            b"".join(chunks[err_r]).decode(errors="replace"))


def judge_patch(call: Call, prog: str, words: list[Word], seg: Segment, here: Path) -> None:
    """`patch` / `git apply` / `git am`: the files the patch names."""
    args = [w for w in words[1:] if not w.startswith("-")][1 if prog == "git" else 0:]
    if prog == "patch":
        given = [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-i", "--input")]
        sources = given or list(seg.read_from)
        call.write(next((r for a in args if (r := protected(resolve(here, a)))), None))  # `patch FILE < PATCH`
    else:
        sources = args
    if not sources:
        call.cannot_judge(f"`{' '.join(words[:2])}` of a patch it cannot read", here, writes=True)
        return
    for source in sources:
        text = read_text(resolve(here, source))
        for name in re.findall(r"^(?:\+\+\+|---|rename to|copy to) (?:[ab]/)?(\S+)|^diff --git a/\S+ b/(\S+)", text, re.M):
            path = name[0] or name[1]
            if path != "/dev/null":
                call.write(protected(resolve(here, path)) or protected(resolve(here, path.split("/", 1)[-1])))


def judge_training(call: Call, prog: str, words: list[Word], here: Path) -> None:
    """Training outside `finetune launch`: `trl grpo`, a launcher or python of TRL's scripts, the package's trainer
    module, or a script that uses GRPOTrainer. A module or script the rendered run starts is judged as a launch."""
    args = [str(w) for w in words[1:]]
    if prog == "trl" and args[:1] and args[0] not in ("env", "vllm-serve", "--help", "-h"):
        raise deny_training(f"`trl {args[0]}`")
    if prog not in LAUNCHERS | {"python"}:
        return
    rest = args[1:] if prog == "accelerate" and args[:1] == ["launch"] else args
    if prog == "accelerate" and args[:1] != ["launch"]:
        return
    module = rest[rest.index("-m") + 1] if "-m" in rest and rest.index("-m") + 1 < len(rest) else None
    if module is not None:
        after = rest[rest.index("-m") + 2:]
        if module == "llm_finetuning.launch.worker":
            positional = [a for a in after if not a.startswith("-")]
            if positional:
                call.launches.append(resolve(here, positional[0]))
        elif TRAINER_CODE.search(module) or module.split(".")[0] == "trl":
            raise deny_training(f"`{prog} -m {module}`")
        elif (source := here / (module.replace(".", "/") + ".py")).is_file():
            judge_program_code(call, read_text(source), f"The module {module}", here)
        return
    if prog == "python":
        return  # scripts and -c code were judged as interpreter code
    script = next((a for a in rest if a.endswith(".py")), None)
    if script is not None and (path := resolve(here, script)).is_file():
        judge_program_code(call, read_text(path), f"The script {script} that `{prog}` starts", here)


def make_recipes(text: str, targets: list[str]) -> str | None:
    """The recipe lines `make TARGETS` runs (with their prerequisites'), or None when the targets are not
    rules of this Makefile (then the whole file is judged)."""
    rules: dict[str, tuple[list[str], list[str]]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("\t") and current is not None:
            current.append(line[1:].lstrip("@+-"))
        elif (m := re.match(r"^([\w./%-]+(?:\s+[\w./%-]+)*)\s*::?(?!=)(.*)$", line)) and "=" not in m.group(1):
            current = []
            for name in m.group(1).split():
                rules[name] = (m.group(2).split(";")[0].split(), current)
        elif line.strip() and not line.startswith("\t"):
            current = None
    first = next((t for t in rules if not t.startswith(".")), None)
    queue = list(targets) or ([first] if first else [])
    if not queue or any(t not in rules for t in queue):
        return None
    seen: set[str] = set()
    lines: list[str] = []
    while queue:
        name = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        prereqs, recipe = rules[name]
        queue += [p for p in prereqs if p in rules]
        lines += recipe
    return "\n".join(lines)


def judge_makefile(call: Call, words: list[Word], here: Path) -> None:
    """`make`: the recipes it runs, and the scripts they run, judged as code."""
    args = [str(w) for w in words[1:]]
    folder = resolve(here, args[args.index("-C") + 1]) if "-C" in args and args.index("-C") + 1 < len(args) else here
    if "-f" in args and args.index("-f") + 1 < len(args):
        makefile = resolve(folder, args[args.index("-f") + 1])
    else:
        makefile = next((folder / n for n in ("GNUmakefile", "makefile", "Makefile") if (folder / n).is_file()),
                        folder / "Makefile")
    text = read_text(makefile)
    if not text:
        return
    values = {args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-C", "-f", "-j", "-l", "-o", "-W", "-I")}
    targets = [a for a in args if not a.startswith("-") and "=" not in a and a not in values]
    recipes = make_recipes(text, targets)
    text = text if recipes is None else recipes
    where = f"The Makefile {makefile.name}" + (f" (`make {' '.join(targets)}`)" if targets else "")
    if TRAINER_COMMAND.search(revealed(text)):
        raise deny_training(where)
    for script in set(re.findall(r"[\w./-]+\.py\b", text)):
        path = resolve(folder, script)
        if path.is_file():
            judge_program_code(call, read_text(path), f"The script {script} that {makefile.name} runs", folder)
    judge_program_code(call, text, where, folder)
    for command in text.splitlines():
        if not re.search(r"\$[({]|\$[@<^*?]", command):
            check_bash(command, folder, call, 2)


def run_files(prog: str, words: list[Word], here: Path) -> list[Path]:
    """Run directories whose rendered files this command runs directly."""
    files = words if prog in RUNNERS or prog == "python" else words[:1]
    out = []
    for tok in files:
        value = tok.split("=", 1)[1] if tok.startswith("--") and "=" in tok else tok
        if os.path.basename(value) in RUN_FILES:
            out.append(resolve(here, value).parent)
    return out


CODE_SUFFIXES = {".py", ".pyw", ".ipynb", ".sh", ".bash", ".zsh", "", ".pl", ".js", ".mjs", ".ts", ".rb", ".mk"}


def check_file_tool(tool: str, tool_input: dict[str, Any], here: Path) -> None:
    raw = tool_input.get(FILE_TOOLS[tool])
    if not isinstance(raw, str) or not raw:
        return
    path = resolve(here, raw)
    texts = [tool_input.get(k) for k in ("content", "new_string", "new_source")]
    texts += [e.get("new_string") for e in tool_input.get("edits") or [] if isinstance(e, dict)]
    new = "\n".join(t for t in texts if isinstance(t, str))
    reason = protected(path)
    settings = reason is not None and "Claude Code settings" in reason and guard_file(path) == reason
    if path.name == "manifest.json" and (path.parent / "grpo_config.yaml").exists():
        raise Denied(f"{tool} on {path} is not allowed: it binds a rendered run to the gate's verdict. "
                     f"Fix: change the brief and {FIX_LAUNCH}")
    if reason and reason.endswith(RUN_REASON):
        raise Denied(f"{tool} is not allowed here: {reason}. Fix: change the brief and {FIX_LAUNCH}")
    if reason and not settings:
        why, fix = (WHY_GUARD, FIX_GUARD) if guard_file(path) else (WHY_RECORDS, ASK_PERSON)
        raise Denied(f"{tool} is not allowed here: {reason}. {why}. Fix: {fix}")
    if settings and DISABLE_GUARD.search(new):
        raise Denied(f"{tool} on {path} would switch the guard off (`disableAllHooks` or the plugin disabled). "
                     f"{WHY_GUARD}. Fix: {FIX_GUARD}")
    if path.suffix in (".json", ".jsonl") and RECORD_MARKER.search(new):
        raise Denied(f"{tool} would write llm-finetuning record JSON by hand to {path}. {WHY_RECORDS}. Fix: {ASK_PERSON}")
    view = revealed(new)
    if RECORDS_API.search(view) and RECORD_WRITERS.search(view):
        raise Denied(f"{tool} would write code to {path} that uses the llm_finetuning records API to write or seal a "
                     f"record. {WHY_RECORDS}. Fix: use the `finetune` verbs; {ASK_PERSON}")
    if DYNAMIC_IMPORT.search(new) and RECORD_WRITERS.search(view) and "llm_finetuning" in view:
        raise Denied(f"{tool} would write code to {path} that imports an llm_finetuning module by a computed name "
                     f"and calls the functions that write records. {WHY_RECORDS}. Fix: {ASK_PERSON}")
    code_file = path.suffix in CODE_SUFFIXES or path.name in ("Makefile", "makefile", "GNUmakefile")
    if code_file and (TRAINER_CODE.search(view) or (path.suffix != ".py" and TRAINER_COMMAND.search(view))):
        raise deny_training(f"{tool} of {path}, a script that")


# --- launches ------------------------------------------------------------------------------------------------


MISMATCH_PHRASES = {"missing_file": "{key} was edited or removed after rendering",
                    "edited_file": "{key} was edited or removed after rendering",
                    "brief_missing": "the brief {brief} changed after rendering",
                    "brief_changed": "the brief {brief} changed after rendering",
                    "record_changed": "{key} ({rel}) changed after rendering"}


def manifest_problems(run_dir: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """The manifest and every sha256 in it that no longer holds (`integrity`, as `finetune launch` checks it)."""
    path = run_dir / "manifest.json"
    if not path.is_file():
        return None, ["it has no manifest.json: it was not rendered by `finetune render` after a passing gate"]
    try:
        manifest = integrity.read_manifest_json(run_dir)
    except (OSError, ValueError):
        manifest = None
    fields = integrity.manifest_fields(manifest)
    if fields is None:
        return None, [f"{path} is not a manifest written by `finetune render`"]
    files, brief, digest, records, _ = fields
    problems = []
    for m in integrity.manifest_mismatches(run_dir, files, brief, digest, records):
        rel = records.get(m.key.removeprefix("records."), {})
        problems.append(MISMATCH_PHRASES[m.kind].format(key=m.key, brief=brief,
                                                         rel=rel.get("path") if isinstance(rel, dict) else None))
    return manifest, problems


def gate_commands(brief: Path) -> list[list[str]]:
    """The ways to run `finetune gate BRIEF --json` in an isolated interpreter (`-I`: the working directory,
    PYTHONPATH and user site never on sys.path), in order: the Python of a `finetune` installed on PATH (never
    the plugin's launcher, whose `python3 -m` would put the project first on sys.path), the guard's own Python,
    the private environment `llm-finetuning-setup` builds."""
    tail = ["-I", "-m", "llm_finetuning.cli", "gate", str(brief), "--json"]
    pythons = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        exe = Path(folder or ".") / "finetune"
        if folder and os.path.isabs(folder) and regular_file(exe) and os.access(exe, os.X_OK):
            first = read_text(exe, 4096).split("\n", 1)[0]
            if first.startswith("#!") and "python" in first and "llm-finetuning-plugin-launcher" not in read_text(exe, 4096):
                pythons.append(first[2:].strip().split()[0])
                break
    pythons.append(sys.executable)
    data = os.environ.get("CLAUDE_PLUGIN_DATA")
    venv = os.environ.get("LLM_FINETUNING_VENV") or (str(Path(data) / "venv") if data else "")
    if venv:  # where bin/llm-finetuning-setup builds it
        pythons.append(str(Path(venv) / "bin" / "python"))
    return [[exe, *tail] for exe in dict.fromkeys(pythons) if exe and os.path.isabs(exe)]


def gate_verdict(brief: Path) -> dict[str, Any]:
    """The gate's JSON report for the brief, from a child interpreter started isolated (never in this process:
    the gate's imports happen after the project is read)."""
    tried = []
    for command in gate_commands(brief):
        try:
            returncode, stdout, stderr = run_child(command, DEADLINE_S - 5)
        except OSError as exc:
            tried.append(f"{command[0]}: {exc.strerror or exc}")
            continue
        if "No module named llm_finetuning" in stderr:
            tried.append(f"{command[0]} has no llm_finetuning")
            continue
        try:
            report = json.loads(stdout)
        except ValueError:
            reason = (stderr or stdout).strip()[:500] or f"`finetune gate` exited {returncode}"
            raise Denied(f"the gate cannot be run here ({reason}). Fix: install the CLI with `llm-finetuning-setup`") from None
        if not isinstance(report, dict):
            raise Denied("`finetune gate --json` did not print a report. Fix: reinstall with `llm-finetuning-setup`")
        return report
    raise Denied(f"the gate cannot be run here ({'; '.join(tried) or 'no Python found'}). "
                 "Fix: install the CLI with `llm-finetuning-setup`")


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


def sandboxed_project(here: Path) -> bool:
    """The project's Claude Code settings (`settings.local.json` over `settings.json`) turn the sandbox on, as
    `finetune protect` does: there a run started from the Bash tool would end with the call."""
    root = Path(os.environ.get("CLAUDE_PROJECT_DIR") or here)
    enabled = None
    for name in ("settings.json", "settings.local.json"):
        try:
            sandbox = json.loads((root / ".claude" / name).read_text(encoding="utf-8")).get("sandbox")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(sandbox, dict) and "enabled" in sandbox:
            enabled = sandbox["enabled"]
    return enabled is True


def check_launches(run_dirs: list[Path], here: Path) -> None:
    if run_dirs and sandboxed_project(here):
        raise Denied(f"launch refused: in this protected project the Bash tool runs sandboxed, where a run cannot "
                     f"outlive the call and the gate cannot be judged from the agent's side. Fix: {FIX_BROKER_LAUNCH}")
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
                check_launches(check_bash(command, here), here)
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


def unjudged(raw: str, problem: str, always: bool = False) -> str | None:
    """The deny reason for a call the guard could not judge: calls that name what it protects, or any call
    (`always`, at the deadline)."""
    if not always and not PROTECTED_WORDS.search(raw):
        return None
    return (f"{PREFIX}: the guard could not judge it ({problem}), so this call is denied. Fix: retry it as a plain "
            "command with literal paths; if it keeps failing, ask the person to run it in their own terminal")


def call_text(raw: str) -> str:
    """What the call asks for (tool name and input), the text searched for protected words; the raw input when it
    is not a hook event."""
    try:
        event = json.loads(raw)
        return f"{event['tool_name']} {json.dumps(event['tool_input'], ensure_ascii=False)}"
    except (ValueError, KeyError, TypeError):
        return raw


def main() -> int:
    raw = [""]

    def past_deadline(signum: int, frame: Any) -> None:
        # Answer and leave at once: an exception raised here could be caught by the code it interrupts.
        answer(unjudged(raw[0], f"TimeoutError: judging the call took longer than {DEADLINE_S:g} s", always=True))
        os._exit(0)

    if hasattr(signal, "setitimer"):  # from the start: reading the input counts against the deadline too
        signal.signal(signal.SIGALRM, past_deadline)
        signal.setitimer(signal.ITIMER_REAL, DEADLINE_S)
    try:
        raw[0] = sys.stdin.read()
        event = json.loads(raw[0] or "{}")
        if not isinstance(event, dict):
            raise ValueError("the hook input is not a JSON object")
        if integrity is None:
            raise ImportError(f"the guard's shared code {PLUGIN_SRC}/llm_finetuning/integrity.py is missing")
        reason = decide(event)
    except Exception as exc:  # noqa: BLE001 - fail closed on what names what the guard protects
        reason = unjudged(call_text(raw[0]), f"{type(exc).__name__}: {exc}")
    if hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, 0)
    answer(reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
