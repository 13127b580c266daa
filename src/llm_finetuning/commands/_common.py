"""Helpers shared by the verbs: loading a brief for a verb and printing errors the one way."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn

import click

from llm_finetuning.brief import Brief
from llm_finetuning.errors import EXIT_UNUSABLE, BriefError, UnusableInput, render_errors


def fail_unusable(exc: UnusableInput, as_json: bool = False) -> NoReturn:
    """Print an unusable-input error (one line) and exit 2."""
    if as_json:
        click.echo(json.dumps({"error": exc.reason, "fix": exc.fix, "path": exc.path}))
    else:
        click.echo(f"error: {exc.line()}", err=True)
    sys.exit(EXIT_UNUSABLE)


def fail_brief(errors: list[BriefError], brief_path: Path, as_json: bool = False) -> NoReturn:
    """Print every brief error and exit 2."""
    if as_json:
        click.echo(render_errors(errors, as_json=True))
    else:
        click.echo(render_errors(errors, header=f"{brief_path}: {len(errors)} problem(s)"), err=True)
    sys.exit(EXIT_UNUSABLE)


def load_checked_brief(path: str | Path, as_json: bool = False, *, for_gate: bool = False) -> Brief:
    """A valid Brief, or exit 2 with every error printed. The verb loads its brief once, here, and passes it down.

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
