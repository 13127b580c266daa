"""`finetune install-command [--project DIR] [--force]`: a bare `/finetune` for Claude Code in a project.

Claude Code namespaces plugin commands, so the plugin's command is `/llm-finetuning:finetune` and a bare
`/finetune` is unknown. A project-level `.claude/commands/finetune.md` is what makes `/finetune`; this verb
writes a thin one that hands over to the plugin's command through the Skill tool (checked with the real
client: the Skill tool answers "Launching skill: llm-finetuning:finetune" and the plugin command's text,
with the arguments in it, reaches the model). Exit 0 written or already there, 2 a different file is there.
"""

from __future__ import annotations

from pathlib import Path

import click

from llm_finetuning.commands._common import fail
from llm_finetuning.errors import UnusableInput

PLUGIN_COMMAND = "llm-finetuning:finetune"
COMMAND_FILE = Path(".claude") / "commands" / "finetune.md"
COMMAND_TEXT = f"""\
---
description: Gate, render, launch and watch a GRPO brief (hands over to the llm-finetuning plugin's /{PLUGIN_COMMAND})
argument-hint: BRIEF
allowed-tools: Skill
---

Call the Skill tool with `skill: "{PLUGIN_COMMAND}"` and `args: "$ARGUMENTS"`, then follow the
instructions it loads: they are the llm-finetuning plugin's `/{PLUGIN_COMMAND}` command (the Phase 1
gate, then render, launch and watch, with the llm-finetuning-training-engineer agent).
If `{PLUGIN_COMMAND}` is not among the available skills, the plugin is not installed: tell the person
to run `claude plugin marketplace add <the llm-finetuning repository>` and
`claude plugin install llm-finetuning@llm-finetuning-marketplace`, then stop.
"""


@click.command("install-command")
@click.option("--project", "project", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="The project folder that gets .claude/commands/finetune.md.")
@click.option("--force", is_flag=True, help="Replace a different existing .claude/commands/finetune.md.")
def command(project: Path, force: bool) -> None:
    """Write PROJECT/.claude/commands/finetune.md so that `/finetune BRIEF` works in Claude Code there."""
    from llm_finetuning.fileio import atomic_write_bytes

    target = project / COMMAND_FILE
    if target.is_dir():
        fail(UnusableInput("is a folder, expected the command file.",
                                    "move it away and run `finetune install-command` again", str(target)))
    if target.is_file():
        existing = target.read_text(errors="replace")
        if existing == COMMAND_TEXT:
            click.echo(f"{target}: already installed; /finetune BRIEF hands over to /{PLUGIN_COMMAND}")
            return
        if not force:
            fail(UnusableInput(
                "a different /finetune command is already there (left unchanged).",
                f"run `finetune install-command --project {project} --force` to replace it", str(target)))
    atomic_write_bytes(target, COMMAND_TEXT.encode())
    click.echo(f"wrote {target}: /finetune BRIEF in Claude Code now hands over to the llm-finetuning "
               f"plugin's /{PLUGIN_COMMAND} (the plugin must be installed)")
    click.echo(COMMAND_TEXT.rstrip())
    click.echo(f"To keep the agent's commands off the records and the reviewer's key there, run `finetune protect "
               f"--project {project}` (docs/security.md says what it costs).")
