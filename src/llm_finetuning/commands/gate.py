"""`finetune gate BRIEF [--json]`: the Phase 1 gate. Exit 0 pass, 1 rejected, 2 unusable input.

Every check runs and is reported (id, verdict, YAML path, reason, fix); the fast path imports no ML
library and, for a brief that was valid before, not even jsonschema.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


@click.command("gate")
@click.argument("brief", type=click.Path(dir_okay=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def command(brief: Path, as_json: bool) -> None:
    """Run every Phase 1 check on BRIEF: schema, verifiable reward, text-only task, nonzero base success,
    a current sealed reward inspection, group and batch sizes, recipe values, variant, hardware, overrides
    and memory. Each result names the YAML path and the command or edit that fixes it."""
    from llm_finetuning.gate import run_gate

    report = run_gate(brief)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        click.echo(report.render())
    sys.exit(report.exit_code)
