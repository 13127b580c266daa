"""Errors as values.

Every problem the product finds in a brief, a record, a gate check, a run directory or a launch is one
`Problem(id, path, message, fix, severity)`: a stable slug, where (`rewards[1].weight`,
`records.inspection`, a rendered file), what was found, and the fix. Modules collect them;
`render_problems` is the one place that prints them (one line each, or the one JSON error shape) and the
CLI alone turns them into exit codes. No module here imports the ML stack.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

from llm_finetuning.jsonvalue import JsonObject

# Exit codes shared by every verb (docs/workflow.md, "The CLI").
EXIT_OK = 0
EXIT_REJECTED = 1
EXIT_UNUSABLE = 2

UNUSABLE_INPUT = "unusable_input"


class TextEnum(str, Enum):
    """An enum whose members are their strings: `Severity.ERROR == "error"`, json.dumps writes `"error"`, and
    str(), format() and f-strings print the value (a str-mixin Enum prints `Severity.ERROR` there on Python
    3.11 and 3.12; `enum.StrEnum` would do the same but needs 3.11). A member hashes as its string, so it and
    the string read from a record are one key of a dict or a set (Enum hashes the member's name)."""

    def __str__(self) -> str:
        return str(self.value)

    def __hash__(self) -> int:
        return str.__hash__(self)


class Severity(TextEnum):
    """How much a Problem or a diagnose Finding weighs: ERROR blocks (for diagnose: a failure mode), WARNING is
    shown and does not block, INFO says what happened and is no failure (diagnose's `converged`)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Problem:
    """One thing wrong: `id` a stable slug saying what kind of problem (`unknown_field`, `stale`,
    `global_batch`), `path` where (a YAML path such as `rewards[1].weight`, a record key, a file of a run
    directory; empty when the whole input is concerned), `message` what was found, `fix` the command or
    edit that cures it, `severity` ERROR (blocks) or WARNING (shown, does not block)."""

    id: str
    path: str
    message: str
    fix: str = ""
    severity: Severity = Severity.ERROR

    def what(self) -> str:
        """`path: message` without the fix: for quoting the problem inside another one's message, which
        carries its own fix (quoting `line()` there prints "Fix:" twice on one line)."""
        return f"{self.path}: {self.message}" if self.path else self.message

    def line(self) -> str:
        """`path: message Fix: fix`, the form every verb prints; the fix is never left out."""
        fix = f" Fix: {self.fix}" if self.fix else ""
        return f"{self.what()}{fix}"

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: JsonObject) -> Problem:
        """A Problem from its `to_json` form (another process's output), its severity a Severity again;
        TypeError, KeyError or ValueError when the object is not one."""
        return cls(_text(data, "id"), _text(data, "path"), _text(data, "message"), _text(data, "fix", ""),
                   Severity(data.get("severity", Severity.ERROR)))


def _text(data: JsonObject, key: str, default: str | None = None) -> str:
    """The string at `key` (`default` when absent and one is given): KeyError when missing, TypeError when not
    a string."""
    value = data[key] if default is None else data.get(key, default)
    if not isinstance(value, str):
        raise TypeError(f"{key} is {type(value).__name__}, not a string")
    return value


class ProblemError(Exception):
    """The one base of the exceptions that carry Problems (`UnusableInput` with its `RecordError` and `KeyProblem`,
    `RenderError`, `LaunchRefused`): the Problems, in order, and the exit code the CLI ends with. The CLI converts
    every one in one place
    (`commands._common.fail`): the JSON error shape on stdout, or `header(subject)` and one line a Problem
    on stderr (a bare `error: ` line when there is no header)."""

    exit_code = EXIT_UNUSABLE

    def __init__(self, problems: list[Problem], exit_code: int | None = None) -> None:
        super().__init__("\n".join(p.line() for p in problems))
        self.problems = list(problems)
        if exit_code is not None:
            self.exit_code = exit_code

    def header(self, subject: Path | str) -> str:
        """The human form's first line about `subject` (the path the user typed); empty for none."""
        return ""


class UnusableInput(ProblemError):
    """Input the product cannot read at all (missing file, malformed YAML, wrong record format).

    Carries one Problem (id `unusable_input`); the CLI prints it and exits with EXIT_UNUSABLE.
    """

    def __init__(self, message: str, fix: str = "", path: str = "") -> None:
        self.message = message
        self.fix = fix
        self.path = path
        super().__init__([self.problem])
        self.args = (message,)

    @property
    def problem(self) -> Problem:
        return Problem(UNUSABLE_INPUT, self.path, self.message, self.fix)

    def line(self) -> str:
        return self.problem.line()


def format_path(parts: list[str | int] | tuple[str | int, ...]) -> str:
    """`['rewards', 1, 'args', 'x']` -> `rewards[1].args.x`."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def sort_problems(problems: list[Problem]) -> list[Problem]:
    """Deduplicated, sorted by path so output is stable."""
    return sorted(set(problems), key=lambda p: (p.path, p.message, p.id))


def problems_json(problems: list[Problem], **extra: object) -> dict[str, object]:
    """The one JSON error shape: `{"ok", "problems": [{"id", "path", "message", "fix", "severity"}], ...}`;
    `ok` is false when any problem is an error. `extra` adds a verb's own keys after these two."""
    return {"ok": not any(p.severity == Severity.ERROR for p in problems),
            "problems": [p.to_json() for p in problems], **extra}


def render_problems(problems: list[Problem], as_json: bool = False, header: str = "",
                    extra: Mapping[str, object] | None = None) -> str:
    """The one renderer of problems, in the order given: human (`header`, then one line each) or the JSON
    error shape (`extra`: the verb's own keys)."""
    if as_json:
        return json.dumps(problems_json(problems, **(extra or {})), indent=2)
    lines = [header] if header else []
    lines += [p.line() for p in problems]
    return "\n".join(lines)


def short_repr(value: object, limit: int = 60) -> str:
    """A value as it would appear in YAML, cut to `limit` characters for messages."""
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
