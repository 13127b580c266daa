"""`finetune calibrate-judge BRIEF --labels FILE.jsonl`: measure a judge reward against human labels.

Scores every labelled item (`{"prompt", "completion", "label"}`, at least 50) with the brief's judge
reward, prints the agreement figures and writes them to the judge calibration record
(`records.judge_calibration`). Exit 0 when the agreement meets the judge's `args.min_agreement`, 1 when
it does not, 2 for unusable input (no judge, too few or malformed labels, a judge that scored nothing).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

import click

from llm_finetuning.commands._common import fail, fields, load_checked_brief, number, optional_number
from llm_finetuning.errors import EXIT_OK, EXIT_REJECTED, UnusableInput

Spec = TypeVar("Spec")  # a judge reward's spec, handed back as it came


def _pick(judges: list[tuple[str, int, Spec]], wanted: str | None) -> tuple[str, int, Spec]:
    names = ", ".join(n for n, _, _ in judges)
    if not judges:
        raise UnusableInput("the brief has no judge reward", "add a `fn: judge` entry to rewards, or use a verifier",
                            "rewards")
    if wanted is not None:
        for judge in judges:
            if judge[0] == wanted:
                return judge
        raise UnusableInput(f"--reward {wanted!r} is not a judge reward of the brief", f"use one of: {names}")
    if len(judges) > 1:
        raise UnusableInput(f"the brief has {len(judges)} judge rewards ({names})", "choose one with --reward NAME")
    return judges[0]


def _report(entry: Mapping[str, object], record_path: Path) -> str:
    f = fields(entry["figures"])

    def num(key: str) -> str:
        value = optional_number(f.get(key))
        return "n/a" if value is None else f"{value:.3f}"

    verdict = "meets" if entry["meets_threshold"] else "does NOT meet"
    lines = [
        f"judge {entry['reward']}: {f['n_items']} labelled items, {f['n_scored']} scored, {f['n_failed']} without a score",
        f"  agreement (same side of 0.5; an unscored item counts as a disagreement): {num('agreement')}",
        f"  Cohen's kappa: {num('cohen_kappa')}   mean absolute error: {num('mean_abs_error')}",
        f"  pass rate: labels {num('label_pass_rate')}, judge {num('judge_pass_rate')}",
        f"  false-pass rate (judge passes what people failed): {num('false_pass_rate')}   "
        f"false-fail rate: {num('false_fail_rate')}",
        f"  {verdict} args.min_agreement {number(entry['min_agreement']):.2f}",
        f"record: {record_path}",
    ]
    if entry.get("failures"):
        failures = fields(entry["failures"]).items()
        lines.insert(1, "  judge failures: " + ", ".join(f"{k[len('failed_'):]} x{v}" for k, v in failures))
    return "\n".join(lines)


@click.command("calibrate-judge")
@click.argument("brief", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--labels", required=True, type=click.Path(path_type=Path),
              help="JSONL of human-labelled items: prompt, completion, label (0..1, true/false or pass/fail); "
                   "other fields are passed to the judge as dataset columns.")
@click.option("--reward", "reward_name", default=None, help="Which judge reward (when the brief has several).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def command(brief: Path, labels: Path, reward_name: str | None, as_json: bool) -> None:
    """Score human-labelled items with the brief's judge and write the judge calibration record."""
    from llm_finetuning.records.judge_calibration import judge_args, judge_specs, write_record
    from llm_finetuning.records.judge_labels import calibrate, load_labels
    from llm_finetuning.reward_registry import name_occurrence
    from llm_finetuning.rewards import build_reward

    loaded = load_checked_brief(str(brief), as_json)
    name, index, spec = _pick(judge_specs(loaded), reward_name)
    items = load_labels(labels)
    try:
        judge = build_reward(spec, loaded.folder, name_occurrence(name))
    except ValueError as exc:
        raise UnusableInput(f"rewards[{index}]: the judge cannot be built: {exc}", "fix its args") from exc
    entry = calibrate(judge, spec, name, items, labels)
    if entry["figures"]["n_scored"] == 0:
        failures = ", ".join(f"{k[len('failed_'):]} x{v}" for k, v in entry["failures"].items()) or "unknown"
        fail(UnusableInput(f"rewards[{index}]: the judge scored none of the {len(items)} items ({failures})",
                                    f"check that {judge_args(spec).get('endpoint')} serves "
                                    f"{judge_args(spec).get('model')}"), as_json)
    record_path = loaded.resolve(loaded.records.judge_calibration)
    write_record(record_path, entry)
    if as_json:
        click.echo(json.dumps({"record": str(record_path), "reward": name, "figures": entry["figures"],
                               "min_agreement": entry["min_agreement"], "meets_threshold": entry["meets_threshold"],
                               "failures": entry["failures"]}))
    else:
        click.echo(_report(entry, record_path))
    sys.exit(EXIT_OK if entry["meets_threshold"] else EXIT_REJECTED)
