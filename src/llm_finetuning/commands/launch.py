"""`finetune launch`: not yet available (see the CLI table in README.md)."""

from __future__ import annotations

import click

from llm_finetuning.commands._common import not_yet


@click.command("launch", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
def command() -> None:
    """Not yet available in this version."""
    not_yet("launch")
