"""A user's reward that raises is a Problem (`reward_raised`, exit 2) naming the reward, the row and the exception,
for every verb that scores; the verbs that sample call the rewards on the first sampled batch, before the rest
is sampled, and that first batch is sampled exactly as one call would have sampled it."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from llm_finetuning.cli import cli

from .conftest import load

# Raises on a completion that holds a digit (the tiny random model writes some), scores the others.
RAISING = '''
def picky(prompts, completions, **columns):
    out = []
    for c in completions:
        text = c if isinstance(c, str) else c[-1]["content"]
        if any(ch.isdigit() for ch in text) or text == "boom":
            out.append(undefined_helper(text))
        else:
            out.append(0.0)
    return out
'''


def _with_raising_reward(brief_path: Path, always: bool = False) -> Path:
    """The brief with the raising reward added. Its module name is its own: custom rewards are imported by
    module name, so another test's `my_reward` in this process would shadow it."""
    folder = brief_path.parent
    source = RAISING.replace('text == "boom"', "True") if always else RAISING
    (folder / "picky_reward.py").write_text(source)
    data = yaml.safe_load(brief_path.read_text())
    data["rewards"].append({"fn": "picky_reward:picky", "weight": 0.0})
    brief_path.write_text(yaml.safe_dump(data, sort_keys=False))
    return brief_path


def test_score_names_the_reward_the_row_and_the_exception(tmp_path: Path, tiny_person_brief: Path) -> None:
    brief = _with_raising_reward(tiny_person_brief)
    rows = tmp_path / "rows.jsonl"
    good = {"prompt": "p", "completion": "fine", "schema": {"type": "object"}}
    rows.write_text("".join(json.dumps(r) + "\n" for r in (good, good, {**good, "completion": "boom"}, good)))
    result = CliRunner().invoke(cli, ["score", str(brief), "--completions", str(rows)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: rewards[1]: reward picky_reward:picky raised NameError: name 'undefined_helper' "
                           "is not defined on row 2, at picky_reward.py:7 Fix: fix picky_reward:picky (picky_reward.py:7)"), line
    as_json = CliRunner().invoke(cli, ["score", str(brief), "--completions", str(rows), "--json"])
    problem = json.loads(as_json.stdout)["problems"][0]
    assert as_json.exit_code == 2 and (problem["id"], problem["path"]) == ("reward_raised", "rewards[1]")
    assert "finetune score" in problem["fix"]


def test_baseline_stops_at_the_first_batch(tiny_person_brief: Path) -> None:
    """8 prompts of k=8, 4 prompts a batch: the reward raises on the first batch and the second is never sampled."""
    brief = _with_raising_reward(tiny_person_brief, always=True)
    result = CliRunner().invoke(cli, ["baseline", str(brief), "--prompts", "8", "--k", "8", "--json"])
    assert result.exit_code == 2, result.output
    problem = json.loads(result.stdout)["problems"][0]
    assert (problem["id"], problem["path"]) == ("reward_raised", "rewards[1]")
    assert "raised NameError: name 'undefined_helper' is not defined on completion 0 of data row" in problem["message"]
    assert "data/eval.jsonl)" in problem["message"]
    assert "prompts 4/8" in result.stderr and "prompts 8/8" not in result.stderr
    assert not (brief.parent / "records" / "baseline.json").exists()


def test_inspect_reports_it_the_same_way(tiny_person_brief: Path) -> None:
    brief = _with_raising_reward(tiny_person_brief, always=True)
    result = CliRunner().invoke(cli, ["inspect", str(brief), "--samples", "50"])
    assert result.exit_code == 2, result.output
    assert "rewards[1]: reward picky_reward:picky raised NameError" in result.stderr
    assert "Fix: fix picky_reward:picky" in result.stderr


def test_the_first_batch_apart_samples_what_one_call_samples(tiny_person_brief: Path) -> None:
    from llm_finetuning.models import resolve_model
    from llm_finetuning.sampling.data import load_split
    from llm_finetuning.sampling.progress import SamplingProgress
    from llm_finetuning.sampling.run import generate_groups, prompts_at, settings_from_brief
    from llm_finetuning.sampling.transformers_backend import TransformersBackend

    brief = load(tiny_person_brief)
    engine = TransformersBackend(resolve_model(brief.model, brief.folder), device="cpu", batch_sequences=8)
    settings = settings_from_brief(brief, k=4)
    prompts = prompts_at(brief, load_split(brief, "train"), [0, 1, 2, 3, 4], None)
    seen: list[int] = []
    with SamplingProgress(5, 4, enabled=False) as bar:
        whole = generate_groups(engine, brief, prompts, settings, bar)
        apart = generate_groups(engine, brief, prompts, settings, bar,
                                lambda head, groups: seen.extend(p.row_index for p in head))
    assert seen == [0, 1]  # 8 sequences a batch at k=4: the first batch is 2 prompts
    assert [[(c.prompt_index, c.text, c.truncated) for c in g] for g in apart] == \
           [[(c.prompt_index, c.text, c.truncated) for c in g] for g in whole]

