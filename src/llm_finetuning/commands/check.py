"""`finetune check BRIEF [--json]`: schema and consistency check. Exit 0 valid, 2 invalid."""

from __future__ import annotations

import json
from pathlib import Path

import click

from llm_finetuning.commands._common import fail_brief, fail_unusable
from llm_finetuning.errors import UnusableInput


@click.command("check")
@click.argument("brief", type=click.Path(dir_okay=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def command(brief: Path, as_json: bool) -> None:
    """Check BRIEF against the brief format and its cross-field rules, reporting every error at once."""
    from llm_finetuning.brief import load_brief

    try:
        loaded, errors = load_brief(brief)
    except UnusableInput as exc:
        fail_unusable(exc, as_json)
    if errors:
        fail_brief(errors, brief, as_json)
    assert loaded is not None
    if as_json:
        click.echo(json.dumps({"valid": True, "errors": [], "name": loaded.name, "sha256": loaded.sha256}))
    else:
        click.echo(f"{brief}: valid brief '{loaded.name}' (sha256 {loaded.sha256[:12]})")
