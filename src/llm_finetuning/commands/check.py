"""`finetune check BRIEF [--json]`: schema and consistency check. Exit 0 valid, 2 invalid."""

from __future__ import annotations

from pathlib import Path

import click

from llm_finetuning.commands._common import fail_brief
from llm_finetuning.errors import UnusableInput, render_problems


def _note_missing_embedded_model(model: dict[str, object]) -> None:
    """A valid brief whose embedded model is not installed: say so now, not at the first sampling verb."""
    from llm_finetuning.models import EMBEDDED_ID, embedded_gguf_path

    if model.get("id") != EMBEDDED_ID:
        return
    try:
        embedded_gguf_path()
    except UnusableInput as exc:
        click.echo(f"note: {exc.line()} (before gate, baseline, inspect or launch)", err=True)


@click.command("check")
@click.argument("brief", type=click.Path(dir_okay=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def command(brief: Path, as_json: bool) -> None:
    """Check BRIEF against the brief format and its cross-field rules, reporting every error at once."""
    from llm_finetuning.brief import load_brief

    loaded, errors = load_brief(brief)
    if errors:
        fail_brief(errors, brief, as_json)
    assert loaded is not None
    _note_missing_embedded_model(loaded.section("model"))
    if as_json:
        click.echo(render_problems([], as_json=True, extra={"name": loaded.name, "sha256": loaded.sha256}))
    else:
        click.echo(f"{brief}: valid brief '{loaded.name}' (sha256 {loaded.sha256[:12]})")
