"""`finetune render BRIEF -o RUN_DIR [--json]`: the gate, then the run directory. Exit 0, 1 gate rejected, 2.

Pure: imports no torch, transformers, trl or vllm, so it answers in well under a second.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from llm_finetuning.commands._common import fail, load_checked_brief
from llm_finetuning.errors import EXIT_REJECTED, render_problems


@click.command("render")
@click.argument("brief", type=click.Path(path_type=Path))
@click.option("-o", "--output", "run_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Run directory to write (created if missing).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def command(brief: Path, run_dir: Path, as_json: bool) -> None:
    """Run the Phase 1 gate on BRIEF, then write RUN_DIR: grpo_config.yaml (TRL GRPOConfig and `trl grpo`),
    accelerate.yaml, launch.sh, rewards_entry.py, sbatch.sh (several nodes) and manifest.json."""
    loaded = load_checked_brief(brief, as_json, for_gate=True)
    from llm_finetuning.gate import gate_brief

    report = gate_brief(loaded, brief)
    if not report.passed:
        if as_json:
            click.echo(render_problems(report.problems, as_json=True,
                                       extra={"rendered": False, "gate": report.to_json()}))
        else:
            click.echo(report.render())
            click.echo(f"{brief}: nothing was rendered.")
        sys.exit(EXIT_REJECTED)

    from llm_finetuning.render import RenderError, render_run

    try:
        recommend, why_not = report.render_advice()
        assert report.fingerprint is not None  # a passing report carries it
        result = render_run(loaded, run_dir, report.fingerprint, recommend, report.record_sha256)
    except RenderError as exc:
        fail(exc, as_json, subject=brief, extra={"rendered": False})
    notes = ([why_not] if why_not else []) + result.plan.notes + [f"trl grpo: {n}" for n in result.plan.trl_cli_notes]
    if as_json:
        click.echo(render_problems(report.problems, as_json=True, extra={
            "rendered": True, "run_dir": str(run_dir), "files": result.files,
            "topology": result.plan.topology.to_json(), "notes": notes, "gate": report.to_json()}))
        return
    topo = result.plan.topology
    click.echo(f"{brief}: gate passed; rendered run '{loaded.name}' into {run_dir}")
    for check in report.warnings:
        click.echo(f"  gate warning: {check.line()}")
    for name in sorted(result.files):
        click.echo(f"  {name}  sha256 {result.files[name][:12]}")
    click.echo(f"  manifest.json  (brief sha256 {loaded.sha256[:12]})")
    where = "CPU" if topo.cpu else f"{topo.train_processes} training process(es), {topo.distributed}"
    if topo.server_gpus:
        where += f", vLLM server on {topo.server_gpus} GPU(s)"
    click.echo(f"  {where}; generation {topo.generation}")
    for note in notes:
        click.echo(f"  note: {note}")
    launch = f"cd {run_dir} && sbatch sbatch.sh" if topo.nodes > 1 else f"finetune launch {run_dir}"
    click.echo(f"Next: {launch}")
