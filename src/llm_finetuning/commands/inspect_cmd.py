"""`finetune inspect BRIEF [--samples 64]`: scored samples for a person to review.

Samples a pool of about twice `--samples` completions from the train split (the prompts the reward will
score in training), scores each with every reward, keeps `--samples` of them spread over prompts and
over reward values (`sampling.select`), and writes the unreviewed inspection record at
`records.inspection` with a Markdown and an HTML report beside it. The person then runs
`finetune review RECORD` in their own terminal. Exit 0 when written, 2 on unusable input.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from llm_finetuning.brief import Brief
from llm_finetuning.commands._common import load_checked_brief
from llm_finetuning.commands.baseline import backend_options
from llm_finetuning.errors import UnusableInput
from llm_finetuning.records.inspection import MAX_SAMPLES, MIN_SAMPLES

if TYPE_CHECKING:
    from llm_finetuning.sampling.run import SamplingRun

DEFAULT_SAMPLES = 64
POOL_FACTOR = 2  # candidates sampled per kept sample, so the selection can spread over reward values
SEED_OFFSET = 1  # inspect draws other completions than the baseline


def pool_shape(n_rows: int, samples: int) -> tuple[int, int]:
    """(prompts, k) for a pool of about POOL_FACTOR x samples: many prompts, at least 2 completions each."""
    n_prompts = max(1, min(n_rows, samples))
    k = max(2, math.ceil(POOL_FACTOR * samples / n_prompts))
    return n_prompts, k


def build_samples(brief: Brief, run: SamplingRun, samples: int) -> list[dict[str, Any]]:
    """The chosen samples in the shape `records.inspection.create_inspection` stores."""
    from llm_finetuning.sampling.metrics import is_success, verifier_names
    from llm_finetuning.sampling.select import spread_samples

    verifiers = verifier_names(brief.rewards)
    field_name = brief.data.prompt_field
    candidates = []
    for p in run.prompts:
        reference = {k: v for k, v in p.row.items() if k != field_name}
        for c, s in zip(p.completions, p.scores, strict=True):
            candidates.append({
                "prompt_index": p.row_index, "sample_index": c.sample_index,
                "prompt": p.row[field_name], "completion": c.text, "rewards": s["rewards"], "total": s["total"],
                "success": is_success(s["rewards"], verifiers), "truncated": c.truncated,
                "reference": reference,
                **({"explanations": s["explanations"]} if "explanations" in s else {}),
                **({"episode": c.episode} if c.episode is not None else {}),
            })
    chosen = spread_samples(candidates, samples, run.settings.seed)
    for i, sample in enumerate(chosen):
        sample["id"] = f"s{i:03d}"
    return chosen


@click.command("inspect")
@click.argument("brief", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--samples", type=click.IntRange(MIN_SAMPLES, MAX_SAMPLES), default=DEFAULT_SAMPLES,
              show_default=True, help=f"Samples to review ({MIN_SAMPLES}-{MAX_SAMPLES}).")
@backend_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary on stdout.")
def command(brief: Path, samples: int, endpoint: str | None, endpoint_model: str | None, backend: str,
            as_json: bool) -> None:
    """Sample and score outputs, write the unreviewed inspection record and a readable report."""
    loaded = load_checked_brief(str(brief), as_json)
    from llm_finetuning.records.inspection import create_inspection, samples_path
    from llm_finetuning.sampling.data import load_split
    from llm_finetuning.sampling.metrics import SUCCESS_DEFINITION
    from llm_finetuning.sampling.report import write_reports
    from llm_finetuning.sampling.run import sample_brief, score_run
    from llm_finetuning.sampling.select import repeat_note, repeated_pairs

    try:
        n_prompts, k = pool_shape(len(load_split(loaded, "train").rows), samples)
        run = sample_brief(loaded, n_prompts=n_prompts, k=k, split="train", backend=backend, endpoint=endpoint,
                           endpoint_model=endpoint_model, seed_offset=SEED_OFFSET, desc="Inspect")
        score_run(loaded, run, explain=True)
    except ValueError as exc:
        raise UnusableInput(str(exc), "fix the reward spec or the data, then run again", "rewards") from exc
    chosen = build_samples(loaded, run, samples)
    record_path = loaded.resolve(loaded.records.inspection)
    create_inspection(loaded, chosen, record_path, run.model_identity)
    meta = {"brief": loaded.name, "model": run.model_identity, "record": str(record_path),
            "rewards": [r.fn for r in loaded.rewards], "success_definition": SUCCESS_DEFINITION}
    md_path, html_path = write_reports(record_path, chosen, meta)
    successes = sum(1 for s in chosen if s["success"])
    summary = {"record": str(record_path), "samples_file": str(samples_path(record_path)),
               "report_md": str(md_path), "report_html": str(html_path), "samples": len(chosen),
               "successes": successes, "prompts": len({s["prompt_index"] for s in chosen}),
               "repeated": repeated_pairs(chosen), "review_command": f"finetune review {record_path}"}
    note = repeat_note(chosen)
    if note:
        click.echo(f"note: {note}", err=True)
    if as_json:
        click.echo(json.dumps(summary))
        return
    click.echo(f"Wrote {len(chosen)} scored samples ({successes} successes, {len(chosen) - successes} failures, "
               f"from {summary['prompts']} prompts) to {record_path}")
    click.echo(f"Report: {html_path}")
    click.echo(f"        {md_path}")
    click.echo("Next: the person who owns this reward reads the report, then runs, in their own terminal:")
    click.echo(f"  finetune review {record_path}")
