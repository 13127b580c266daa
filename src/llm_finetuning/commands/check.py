"""`finetune check BRIEF [--json]`: schema and consistency check. Exit 0 valid, 2 invalid."""

from __future__ import annotations

from pathlib import Path

import click

from llm_finetuning.commands._common import fail_brief
from llm_finetuning.errors import Problem, Severity, UnusableInput, render_problems
from llm_finetuning.locations import isolated_python


def _note_missing_embedded_model(model_id: str) -> None:
    """A valid brief whose embedded model is not installed: say so now, not at the first sampling verb."""
    from llm_finetuning.models import EMBEDDED_ID, embedded_gguf_path

    if model_id != EMBEDDED_ID:
        return
    try:
        embedded_gguf_path()
    except UnusableInput as exc:
        click.echo(f"note: {exc.line()} (before gate, baseline, inspect or launch)", err=True)


def _note_unreachable_hub_model(brief_folder: Path, model_id: str, gguf_file: str | None) -> None:
    """A valid brief whose hub model is not cached, with the hub out of reach: say so now, not after the
    first sampling verb has retried the connection for a minute (`models.unreachable_model`)."""
    from llm_finetuning.models import EMBEDDED_PREFIX, model_is_local, unreachable_model

    if model_id.startswith(EMBEDDED_PREFIX) or model_is_local(model_id, brief_folder):
        return
    problem = unreachable_model(model_id, gguf_file)
    if problem is not None:
        click.echo(f"note: {problem.line()} (before gate, baseline, inspect or launch)", err=True)


def episode_problems(brief_path: Path, as_json: bool) -> list[Problem]:
    """The episode's import-time problems, from `sampling.episode_probe` in a child process (this process
    stays free of torch and of the brief's tools); warnings are printed here and not returned."""
    import json
    import subprocess

    done = subprocess.run([*isolated_python("llm_finetuning.sampling.episode_probe"), str(brief_path)],
                          capture_output=True, text=True, timeout=600, check=False)
    try:
        found = [Problem.from_json(p) for p in json.loads(done.stdout.strip().splitlines()[-1])]
    except (ValueError, IndexError, KeyError, TypeError):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [Problem("episode_probe", "episode", f"the tools could not be checked: {last}",
                        "run `python -m llm_finetuning.sampling.episode_probe BRIEF` to see the whole error")]
    for p in found:
        if p.severity == Severity.WARNING and not as_json:
            click.echo(f"note: {p.line()}", err=True)
    return [p for p in found if p.severity != Severity.WARNING]


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
    if loaded.episode is not None:
        problems = episode_problems(brief, as_json)
        if problems:
            fail_brief(problems, brief, as_json)
    _note_missing_embedded_model(loaded.model.id)
    _note_unreachable_hub_model(loaded.folder, loaded.model.id, loaded.model.gguf_file)
    if as_json:
        click.echo(render_problems([], as_json=True, extra={"name": loaded.name, "sha256": loaded.sha256}))
    else:
        click.echo(f"{brief}: valid brief '{loaded.name}' (sha256 {loaded.sha256[:12]})")
