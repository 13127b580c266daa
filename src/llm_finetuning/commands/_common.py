"""Helpers shared by the verbs: loading a brief for a verb, printing problems the one way, and reading the fields
of a result (an evaluation, a calibration, scored rows) as the type the output needs."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NoReturn, ParamSpec, TypeVar

import click

from llm_finetuning.brief import Brief
from llm_finetuning.errors import (
    EXIT_UNUSABLE,
    Problem,
    ProblemError,
    render_problems,
    sort_problems,
)

P = ParamSpec("P")
R = TypeVar("R")


def fail(exc: ProblemError, as_json: bool = False, subject: Path | str = "",
         extra: dict[str, object] | None = None) -> NoReturn:
    """The one conversion of an exception that carries Problems: the JSON error shape on stdout (`extra`: the
    verb's own keys), or its header about `subject` and one line a Problem on stderr (`error: LINE` when it has
    no header); then exit with its code (2 unusable, 1 refused)."""
    if as_json:
        click.echo(render_problems(exc.problems, as_json=True, extra=extra))
    else:
        header = exc.header(subject)
        text = render_problems(exc.problems, header=header)
        click.echo(text if header else f"error: {text}", err=True)
    sys.exit(exc.exit_code)


def converting_problems(callback: Callable[P, R]) -> Callable[P, R]:
    """A verb's callback whose ProblemError (an UnusableInput met anywhere below it) ends through `fail`, in the
    verb's `--json` form when it was asked for: the verbs need no `except` of their own for it."""

    @functools.wraps(callback)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return callback(*args, **kwargs)
        except ProblemError as exc:
            fail(exc, bool(kwargs.get("as_json")))

    run.converts_problems = True  # type: ignore[attr-defined]
    return run


def fail_brief(problems: list[Problem], brief_path: Path, as_json: bool = False) -> NoReturn:
    """Print every problem of the brief, sorted by YAML path, and exit 2."""
    ordered = sort_problems(problems)
    if as_json:
        click.echo(render_problems(ordered, as_json=True))
    else:
        click.echo(render_problems(ordered, header=f"{brief_path}: {len(ordered)} problem(s)"), err=True)
    sys.exit(EXIT_UNUSABLE)


def load_checked_brief(path: str | Path, as_json: bool = False, *, for_gate: bool = False) -> Brief:
    """A valid Brief, or exit 2 with every problem printed. The verb loads its brief once, here, and passes it down.

    `for_gate`: through the gate's loader, which skips the schema validation for a brief that passed it
    before and nothing it names changed (`gate.fastload`); for the verbs that gate what they load."""
    if for_gate:  # an UnusableInput (no such file, not YAML) ends through the verb's `converting_problems`
        from llm_finetuning.gate.fastload import load_brief_for_gate

        brief, errors = load_brief_for_gate(Path(path))
    else:
        from llm_finetuning.brief import load_brief

        brief, errors = load_brief(path)
    if brief is None:
        fail_brief(errors, Path(path), as_json)
    return brief


def number(value: object) -> float:
    """A result's figure as a number (TypeError naming what it is otherwise)."""
    if not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, found {type(value).__name__}")
    return value


def optional_number(value: object) -> float | None:
    """A figure that may be absent (None: not applicable, or not measured)."""
    return None if value is None else number(value)


def fields(value: object) -> Mapping[str, object]:
    """A nested object of a result ({name: value}; TypeError naming what it is otherwise)."""
    if not isinstance(value, Mapping):
        raise TypeError(f"expected an object, found {type(value).__name__}")
    return value
