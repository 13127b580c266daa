"""Helpers shared by the verbs: loading a brief for a verb and printing problems the one way."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from llm_finetuning.brief import Brief
from llm_finetuning.errors import (
    EXIT_UNUSABLE,
    Problem,
    UnusableInput,
    render_problems,
    sort_problems,
)


def fail_unusable(exc: UnusableInput, as_json: bool = False) -> NoReturn:
    """Print an unusable-input error (one line, or the JSON error shape) and exit 2."""
    if as_json:
        click.echo(render_problems([exc.problem], as_json=True))
    else:
        click.echo(f"error: {render_problems([exc.problem])}", err=True)
    sys.exit(EXIT_UNUSABLE)


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
    try:
        if for_gate:
            from llm_finetuning.gate.fastload import load_brief_for_gate

            brief, errors = load_brief_for_gate(Path(path))
        else:
            from llm_finetuning.brief import load_brief

            brief, errors = load_brief(path)
    except UnusableInput as exc:
        fail_unusable(exc, as_json)
    if brief is None:
        fail_brief(errors, Path(path), as_json)
    return brief
