"""`finetune eval RUN_DIR`: did the trained model get better on held-out prompts, by more than the noise?

Samples the run's final model (or a checkpoint, or every checkpoint) on the baseline record's prompts
with the baseline's settings, scores it with the brief's rewards, and compares it with the base model
prompt by prompt (a 95% interval on the paired difference in pass@1). `--temperature T` / `--greedy`
compare both sides at that evaluation setting instead (the base side from the record `finetune baseline
--temperature T` / `--greedy` wrote, else sampled again, with a note). Writes RUN_DIR/eval.json, and
RUN_DIR/eval.jsonl for `--checkpoint all` (what `finetune diagnose` reads as the held-out score).
Exit 0 better beyond the noise, 1 not, 2 unusable input.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path

import click

from llm_finetuning.commands._common import fields, number
from llm_finetuning.commands.baseline import backend_options, decoding_options
from llm_finetuning.errors import EXIT_OK, EXIT_REJECTED


def _interval(result: Mapping[str, object]) -> tuple[float, float]:
    """The paired 95% interval of the pass@1 difference."""
    ci95 = result["ci95"]
    if not isinstance(ci95, (list, tuple)) or len(ci95) != 2:
        raise TypeError(f"ci95 is {ci95!r}, not [low, high]")
    return number(ci95[0]), number(ci95[1])


def verdict_line(result: Mapping[str, object]) -> str:
    """One honest sentence about the change in pass@1 and the noise."""
    lo, hi = _interval(result)
    delta = number(result["delta_pass_at_1"])
    points = f"{100 * delta:+.1f} points"
    if result["beyond_noise"] and delta > 0:
        return f"better beyond the noise: pass@1 {points}, and the 95% interval lies above zero"
    if result["beyond_noise"]:
        return f"worse beyond the noise: pass@1 {points}; read `finetune diagnose RUN_DIR` before using this model"
    return (f"not distinguishable from the noise: pass@1 {points}, the 95% interval [{100 * lo:+.1f}, "
            f"{100 * hi:+.1f}] includes zero (more prompts narrow it: --prompts, after a larger baseline)")


def render_human(result: Mapping[str, object]) -> list[str]:
    k, s = result["k"], fields(result["settings"])
    base, trained = fields(result["base"]), fields(result["trained"])
    name = "final model" if result["checkpoint"] == "final" else f"checkpoint {result['checkpoint']}"
    lo, hi = _interval(result)
    decoding = "greedy" if s.get("greedy") else f"temperature {number(s['temperature']):g}"
    from llm_finetuning.evaluation.targets import NO_RUN_MANIFEST

    unbound = [f"  {NO_RUN_MANIFEST}"] if result.get("run_manifest", "") is None else []
    return unbound + [
        f"{name} ({result['prompts']} {result['split']}-split prompts x {k} samples, {decoding}, "
        f"max {s['max_completion_length']} tokens; base side: {fields(result['baseline'])['base_source']})",
        f"  {'':<10}{'base':>8}{'trained':>10}",
        f"  {'pass@1':<10}{100 * number(base['pass_at_1']):>7.1f}%{100 * number(trained['pass_at_1']):>9.1f}%",
        f"  {'pass@' + str(k):<10}{100 * number(base['pass_at_k']):>7.1f}%{100 * number(trained['pass_at_k']):>9.1f}%",
        f"  pass@1 difference {100 * number(result['delta_pass_at_1']):+.1f} points, 95% interval "
        f"[{100 * lo:+.1f}, {100 * hi:+.1f}] (paired over prompts)",
        f"  verdict: {verdict_line(result)}",
    ]


@click.command("eval")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--checkpoint", "which", default="final", show_default=True, metavar="STEP|final|all",
              help="Which saved model: a checkpoint's step, the final model, or every checkpoint (eval.jsonl).")
@click.option("--prompts", "n_prompts", type=click.IntRange(1, 100000), default=None,
              help="Held-out prompts (default: all the baseline record sampled; never others).")
@click.option("--k", "k", type=click.IntRange(1, 1024), default=None,
              help="Samples per prompt (default: the baseline's k; another k samples the base model again).")
@decoding_options("the baseline record's temperature, on both sides (the base side from `finetune baseline "
                  "BRIEF --temperature T` or `--greedy` when recorded, else sampled again)")
@backend_options
@click.option("--brief", "brief_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="RUN_DIR is a model folder trained outside `finetune launch` (no run manifest): score it against "
                   "this brief's baseline; the result says no gate verdict stands behind it.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object on stdout.")
def command(run_dir: Path, which: str, n_prompts: int | None, k: int | None, temperature: float | None,
            greedy: bool, endpoint: str | None, endpoint_model: str | None, backend: str, brief_path: Path | None,
            as_json: bool) -> None:
    """Held-out pass@1/pass@k of the trained model against the baseline record, with a paired 95% interval.

    Both sides are sampled with the baseline's settings, or at --temperature T / --greedy (an evaluation
    setting: the base side from `finetune baseline BRIEF --temperature T` when recorded, else sampled again).
    """
    from llm_finetuning.evaluation.run import EVAL_JSON, EVAL_JSONL, contract, evaluate

    results = evaluate(run_dir, which, n_prompts, k, backend, endpoint, endpoint_model, temperature, greedy, brief_path)
    last = results[-1]
    if as_json:
        out = contract(last)
        if which == "all":
            out["all"] = [contract(r) for r in results]
        click.echo(json.dumps(out))
    else:
        for result in results:
            for line in render_human(result):
                click.echo(line)
        click.echo(f"Wrote {run_dir / EVAL_JSON}" + (f" and {run_dir / EVAL_JSONL}" if which == "all" else ""))
    sys.exit(EXIT_OK if last["beyond_noise"] and last["delta_pass_at_1"] > 0 else EXIT_REJECTED)
