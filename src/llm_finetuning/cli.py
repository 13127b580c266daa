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
    "keys": "keys",
    "calibrate-judge": "calibrate_judge",
    "score": "score",
    "render": "render",
    "launch": "launch",
    "status": "status",
    "stop": "stop",
    "diagnose": "diagnose",
    "eval": "eval_cmd",
    "export": "export_cmd",
    "memory": "memory",
    "demo": "demo",
    "install-command": "install_command",
    "protect": "protect",
    "broker": "broker",
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
        _convert_problems(command)
        return command


def _convert_problems(command: click.Command) -> None:
    """Wrap the callback of a verb, and of each subcommand of a verb that has them (`finetune keys trust`), in
    `converting_problems`: the one place Problems become output."""
    if command.callback is not None and not getattr(command.callback, "converts_problems", False):
        from llm_finetuning.commands._common import converting_problems

        command.callback = converting_problems(command.callback)
    for sub in getattr(command, "commands", {}).values():
        _convert_problems(sub)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="finetune")
def cli() -> None:
    """Gated GRPO/RLVR fine-tuning: check a brief, pass the Phase 1 gate, render, launch (in the background
    with --detach; then status and stop), diagnose, eval, export."""


def main() -> None:
    """Run the CLI. Each verb's callback is wrapped (`LazyGroup.get_command`) so that an exception carrying
    Problems (`errors.ProblemError`: an UnusableInput met deep inside, a refused launch) ends through
    `commands._common.fail`, as lines and its exit code or the JSON error shape, never a traceback; one raised
    before a verb runs (while its options are parsed) ends there too."""
    import sys

    from llm_finetuning.commands._common import fail
    from llm_finetuning.errors import ProblemError

    try:
        cli(prog_name="finetune")
    except ProblemError as exc:
        fail(exc, "--json" in sys.argv[1:])


if __name__ == "__main__":  # pragma: no cover
    main()
