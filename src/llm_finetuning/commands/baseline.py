"""`finetune baseline BRIEF`: how often the base model already succeeds, and whether GRPO has a signal.

Samples k completions for each of N prompts of the eval split (the train split when the brief has no
eval split), scores every reward, writes the baseline record at `records.baseline`, and prints a
verdict. Exit 0 when the record is written (the gate judges it), 2 on unusable input.

`--temperature T` or `--greedy` measures an evaluation setting instead (what a deployed model decodes
with) into a second record beside it (`baseline.t0.7.json`, `baseline.greedy.json`): the gate keeps
judging the training-temperature record, since GRPO's learning signal comes from groups sampled there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from llm_finetuning.brief import Brief
from llm_finetuning.commands._common import load_checked_brief
from llm_finetuning.errors import UnusableInput

if TYPE_CHECKING:
    from llm_finetuning.records.baseline import Baseline
    from llm_finetuning.sampling.metrics import Verdict
    from llm_finetuning.sampling.run import SamplingRun

DEFAULT_PROMPTS = 32
Verb = TypeVar("Verb", bound=Callable[..., object])  # a verb's callback, before click makes it a command


def decoding_options(instead: str) -> Callable[[Verb], Verb]:
    """--temperature and --greedy, shared by baseline and eval; `instead`: what they replace."""
    def add(f: Verb) -> Verb:
        f = click.option("--greedy", is_flag=True,
                         help=f"Decode greedily (no sampling, one completion per prompt) instead of {instead}.")(f)
        f = click.option("--temperature", type=click.FloatRange(0, 5, min_open=True), default=None, metavar="T",
                         help=f"Sample at T (an evaluation setting, e.g. 0.7) instead of {instead}.")(f)
        return f
    return add


def backend_options(f: Verb) -> Verb:
    """--endpoint, --endpoint-model and --backend, shared by baseline and inspect."""
    f = click.option("--backend", type=click.Choice(["auto", "vllm", "transformers", "endpoint"]), default="auto",
                     show_default=True,
                     help="auto: vLLM when installed with a CUDA GPU, else transformers generate.")(f)
    f = click.option("--endpoint-model", default=None,
                     help="Model name to request from --endpoint (default: the first one it lists).")(f)
    f = click.option("--endpoint", default=None, metavar="URL",
                     help="Sample through an OpenAI-compatible server (trl vllm-serve, vllm serve).")(f)
    return f


def build_record(brief: Brief, run: SamplingRun, purpose: str = "training") -> tuple[dict[str, object], Verdict]:
    """The baseline record (through `records.baseline.make_baseline`) and the verdict of a scored run.

    `purpose` is `training` (the record the gate judges) or `evaluation` (another decoding setting).
    """
    from llm_finetuning.records.baseline import make_baseline
    from llm_finetuning.sampling.metrics import (
        SUCCESS_DEFINITION,
        baseline_figures,
        is_success,
        verdict,
        verifier_names,
    )
    from llm_finetuning.sampling.run import recorded_settings

    names = brief.reward_names
    groups = [[{"rewards": s["rewards"], "total": s["total"], "truncated": c.truncated}
               for c, s in zip(p.completions, p.scores, strict=True)] for p in run.prompts]
    verifiers = verifier_names(brief.rewards)
    fig = baseline_figures(groups, names, verifiers)
    k = run.settings.k
    v = verdict(fig, k, run.settings.max_completion_length, brief.grpo.num_generations)
    record = make_baseline(
        brief, model_identity=run.model_identity,
        prompts={"split": run.split.split, "source": run.split.source, "count": len(run.prompts),
                 "indices": [p.row_index for p in run.prompts]},
        k=k, pass_at_1=fig["pass_at_1"], pass_at_k=fig["pass_at_k"], mean_reward=fig["mean_reward"],
        frac_groups_all_tie=fig["frac_groups_all_tie"], frac_truncated=fig["frac_truncated"],
        mean_total=fig["mean_total"], successes=fig["successes"], completions=fig["completions"],
        success_definition=SUCCESS_DEFINITION, verifiers=verifiers,
        sampling={**recorded_settings(run, brief.data.system_prompt), "purpose": purpose},
        per_prompt=[sum(is_success(s["rewards"], verifiers) for s in p.scores) for p in run.prompts],
        verdict=v.to_json(),
    )
    return record, v


def _print_human(record: Baseline, verdict: Any, path: Path, training_path: Path) -> None:
    from llm_finetuning.fileio import shown
    from llm_finetuning.records.baseline import BaselineSampling

    k, sampling = record.k, record.sampling or BaselineSampling()
    decoding = record.decoding
    setting = decoding.label if decoding is not None else "temperature unknown"
    click.echo(f"Baseline of {record.model} on {record.prompts.count} {record.prompts.split} "
               f"prompts x {k} completions, {setting} ({sampling.backend}, {sampling.seconds} s)")
    click.echo(f"  pass@1              {100 * record.pass_at_1:.1f}%")
    if k > 1:  # with one completion a prompt, pass@k is pass@1
        click.echo(f"  pass@{k:<15}{100 * record.pass_at_k:.1f}%")
    for name, value in record.mean_reward.items():
        click.echo(f"  mean {name:<15}{value:.3f}")
    click.echo(f"  groups all tied     {100 * record.frac_groups_all_tie:.1f}%")
    click.echo(f"  cut at max length   {100 * record.frac_truncated:.1f}% "
               f"(max_completion_length {sampling.max_completion_length})")
    if sampling.purpose == "evaluation" and decoding is not None:
        click.echo(f"Evaluation setting: `finetune eval RUN_DIR {decoding.flag}` compares with these figures; the gate "
                   f"judges {shown(training_path)}, measured at the training temperature")
    else:
        click.echo(f"Verdict: {verdict.headline}")
        for line in verdict.advice:
            click.echo(f"  - {line}")
    click.echo(f"Wrote {path}")


@click.command("baseline")
@click.argument("brief", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--prompts", "n_prompts", type=click.IntRange(1, 100000), default=DEFAULT_PROMPTS, show_default=True,
              help="Prompts sampled from the eval split (train when there is none).")
@click.option("--k", "k", type=click.IntRange(1, 1024), default=None,
              help="Completions per prompt (pass@k)  [default: grpo.num_generations, the group size GRPO trains "
                   "with, so the share of all-tied groups describes training's groups]")
@decoding_options("sampling at grpo.temperature, the training temperature; written to a second record "
                  "(baseline.t0.7.json, baseline.greedy.json)")
@backend_options
@click.option("--json", "as_json", is_flag=True, help="Print the record as one JSON object on stdout.")
def command(brief: Path, n_prompts: int, k: int | None, temperature: float | None, greedy: bool,
            endpoint: str | None, endpoint_model: str | None, backend: str, as_json: bool) -> None:
    """Sample K completions for N prompts from the base model, score them, write the baseline record.

    With --temperature T or --greedy it measures that evaluation setting into a second record beside
    records.baseline (baseline.t0.7.json, baseline.greedy.json); the gate judges the training one.
    """
    loaded = load_checked_brief(str(brief), as_json)
    from llm_finetuning.records.baseline import (
        Baseline,
        Decoding,
        brief_sampling_settings,
        completions_per_prompt,
        record_path_for,
        requested_decoding,
        training_record_path,
        write_baseline,
    )
    from llm_finetuning.sampling.run import sample_brief, score_run, settings_from_brief

    now = brief_sampling_settings(loaded)
    try:
        decoding = requested_decoding(loaded, temperature, greedy)
        k = completions_per_prompt(k, decoding, now["k"])
        decoding = decoding or Decoding(now["temperature"])
        settings = settings_from_brief(loaded, k, decoding=decoding)
        run = sample_brief(loaded, n_prompts=n_prompts, k=k, split="auto", backend=backend, endpoint=endpoint,
                           endpoint_model=endpoint_model, desc="Baseline", settings=settings)
        score_run(loaded, run)
    except ValueError as exc:  # a reward refused its spec or a row: unusable input, named by the reward
        raise UnusableInput(str(exc), "fix the reward spec or the data, then run again", "rewards") from exc
    purpose = "training" if decoding.is_training(loaded) else "evaluation"
    record, verdict = build_record(loaded, run, purpose)
    if purpose == "evaluation":  # the learning-signal verdict speaks of training's groups, not of these
        record.pop("verdict", None)
    path = record_path_for(loaded, decoding)
    written = write_baseline(path, record)
    if as_json:
        click.echo(json.dumps({**written, "path": str(path)}))
    else:
        _print_human(Baseline.from_json(written, path), verdict, path, training_record_path(loaded))
        advice = episode_advice(loaded, [c.episode for p in run.prompts for c in p.completions])
        if advice:
            click.echo(advice)


# At least this share of the baseline's episodes cut at episode.max_turns: say so before the first inspection.
CUT_ADVICE_SHARE = 0.2


def episode_advice(brief: Brief, episodes: Sequence[Mapping[str, object] | None]) -> str | None:
    """Before the first inspection, the one time an episode change costs nothing: how many of the baseline's
    episodes the turn limit cut, and that a change after `finetune inspect` makes both records stale."""
    eps = [e for e in episodes if isinstance(e, Mapping)]
    if brief.episode is None or not eps:
        return None
    share = sum(bool(e.get("cut_at_limit")) for e in eps) / len(eps)
    if share < CUT_ADVICE_SHARE:
        return None
    return (f"Episodes: {share:.0%} were cut at episode.max_turns {brief.episode.max_turns} while still calling "
            "tools. If the task needs more calls than that (read a few in the inspection), raise episode.max_turns "
            "now, before `finetune inspect`: after it, an episode change makes this baseline and the inspection "
            "stale (both again, and a new review). Loops of the same call are the task's, for training to reduce.")
