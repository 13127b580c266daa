"""Errors as values.

Every problem the product finds in a brief, a record or a run is a value with a YAML path, what was
found, and the fix. Modules collect them; `render_errors` is the one place that prints them and the CLI
alone turns them into exit codes. No module here imports the ML stack.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

# Exit codes shared by every verb (DESIGN.md, CLI contract).
EXIT_OK = 0
EXIT_REJECTED = 1
EXIT_UNUSABLE = 2


@dataclass(frozen=True, order=True)
class BriefError:
    """One thing wrong with a brief: where (`rewards[1].weight`), what was found, and the fix."""

    path: str
    message: str
    fix: str

    def line(self) -> str:
        where = self.path or "(brief)"
        fix = f" Fix: {self.fix}" if self.fix else ""
        return f"{where}: {self.message}{fix}"

    def to_json(self) -> dict[str, str]:
        return asdict(self)


class UnusableInput(Exception):
    """Input the product cannot read at all (missing file, malformed YAML, wrong record format).

    Carries a one-line reason and a fix; the CLI prints it and exits with EXIT_UNUSABLE.
    """

    def __init__(self, reason: str, fix: str = "", path: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.fix = fix
        self.path = path

    def line(self) -> str:
        where = f"{self.path}: " if self.path else ""
        fix = f" Fix: {self.fix}" if self.fix else ""
        return f"{where}{self.reason}{fix}"


def format_path(parts: list[str | int] | tuple[str | int, ...]) -> str:
    """`['rewards', 1, 'args', 'x']` -> `rewards[1].args.x`."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def sort_errors(errors: list[BriefError]) -> list[BriefError]:
    """Deduplicated, sorted by path so output is stable."""
    return sorted(set(errors), key=lambda e: (e.path, e.message))


def render_errors(errors: list[BriefError], as_json: bool = False, header: str = "") -> str:
    """The one renderer of brief errors, human (one line each) or JSON."""
    ordered = sort_errors(errors)
    if as_json:
        return json.dumps({"valid": not ordered, "errors": [e.to_json() for e in ordered]}, indent=2)
    lines = [header] if header else []
    lines += [e.line() for e in ordered]
    return "\n".join(lines)


def short_repr(value: Any, limit: int = 60) -> str:
    """A value as it would appear in YAML, cut to `limit` characters for messages."""
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
