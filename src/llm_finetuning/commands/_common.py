"""Helpers shared by the verbs: loading a brief for a verb and printing problems the one way."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from llm_finetuning.errors import EXIT_UNUSABLE, Problem, UnusableInput, render_problems, sort_problems


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


def load_checked_brief(path: str, as_json: bool = False) -> Any:
    """A valid Brief, or exit 2 with every problem printed."""
    from llm_finetuning.brief import load_brief

    try:
        brief, errors = load_brief(path)
    except UnusableInput as exc:
        fail_unusable(exc, as_json)
    if errors:
        fail_brief(errors, Path(path), as_json)
    return brief
