"""The `finetune` command line: one thin module per verb under `llm_finetuning.commands`.

Verbs are loaded lazily so `finetune --help` and `finetune check` never import the ML stack.
"""

from __future__ import annotations

import importlib

import click

from llm_finetuning import __version__

# verb -> module under llm_finetuning.commands that defines `command` (a click.Command)
VERBS: dict[str, str] = {
    "check": "check",
    "gate": "gate",
    "baseline": "baseline",
    "inspect": "inspect_cmd",
    "review": "review",
    "calibrate-judge": "calibrate_judge",
    "score": "score",
    "render": "render",
    "launch": "launch",
    "diagnose": "diagnose",
    "eval": "eval_cmd",
    "export": "export_cmd",
    "memory": "memory",
    "demo": "demo",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(VERBS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = VERBS.get(cmd_name)
        if module is None:
            return None
        mod = importlib.import_module(f"llm_finetuning.commands.{module}")
        command: click.Command = mod.command
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="finetune")
def cli() -> None:
    """Gated GRPO/RLVR fine-tuning: check a brief, pass the Phase 1 gate, render, launch, diagnose, eval, export."""


def main() -> None:
    cli(prog_name="finetune")


if __name__ == "__main__":  # pragma: no cover
    main()
