"""`finetune demo`: the whole pipeline on the embedded example, on CPU (exit 0)."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("demo")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Work folder, replaced if it exists  [default: demo/ in the cache folder, "
                   "$LLM_FINETUNING_CACHE, else $XDG_CACHE_HOME/llm-finetuning, else ~/.cache/llm-finetuning, so a "
                   "checkout stays clean].")
@click.option("--steps", type=click.IntRange(1, 10000), default=None,
              help="GRPO steps (default: the example brief's max_steps).")
@click.option("--eval-prompts", type=click.IntRange(1, 128), default=32, show_default=True,
              help="Held-out prompts scored before and after training.")
@click.option("--k", type=click.IntRange(1, 16), default=8, show_default=True,
              help="Samples per held-out prompt (8, the baseline record's k, takes the base side from the record; "
                   "another k samples the base model again).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object on stdout.")
def command(out: Path | None, steps: int | None, eval_prompts: int, k: int, as_json: bool) -> None:
    """Run gate, render, launch, evaluation and diagnose on the embedded SmolLM2-135M-Instruct example."""
    from llm_finetuning.commands.eval_cmd import verdict_line
    from llm_finetuning.demo import run_demo
    from llm_finetuning.models import embedded_gguf_path

    embedded_gguf_path()  # before any work folder is written: the demo's model must be there
    from llm_finetuning.demo import default_work_dir

    summary = run_demo(out or default_work_dir(), steps, eval_prompts, k)
    if as_json:
        click.echo(json.dumps(summary.to_json()))
        return
    before, after = summary.pass_before or 0.0, summary.pass_after or 0.0
    result = summary.evaluation
    lo, hi = result["ci95"]
    click.echo("")
    click.echo(click.style("finetune demo: summary", bold=True))
    click.echo(f"  held-out pass@1  before {before:.1%}  after {after:.1%}  ({result['prompts']} prompts x "
               f"{result['k']} samples; base side: {result['baseline']['base_source']})")
    click.echo(f"  pass@{result['k']}           before {result['base']['pass_at_k']:.1%}  after "
               f"{result['trained']['pass_at_k']:.1%}")
    click.echo(f"  difference       {100 * result['delta_pass_at_1']:+.1f} points, 95% interval "
               f"[{100 * lo:+.1f}, {100 * hi:+.1f}] (paired over prompts)")
    click.echo(f"  {verdict_line(result)}")
    click.echo(f"  wall time        {summary.minutes:.1f} min")
    for s in summary.stages:
        click.echo(f"    {s.seconds:7.1f} s  {s.name}{'  -> ' + s.note if s.note else ''}")
    click.echo(f"  work folder      {summary.work_dir}")
    click.echo(f"  run directory    {summary.run_dir}  (grpo_config.yaml, metrics.jsonl, model/)")
    click.echo(f"  diagnosis plot   {summary.run_dir / 'diagnosis.png'}")
