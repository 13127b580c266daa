"""`finetune baseline` on a tool-use brief says, before the first inspection, how many episodes the turn limit
cut, and that changing the episode after `finetune inspect` makes both records stale (docs/gate.md, "A hard
task")."""

from __future__ import annotations

from pathlib import Path

from llm_finetuning.brief import load_brief
from llm_finetuning.commands.baseline import episode_advice

REPO = Path(__file__).resolve().parents[2]


def test_cut_episodes_are_named_before_the_inspection_with_what_a_later_change_costs() -> None:
    brief, errors = load_brief(REPO / "examples/inventory-tools/brief.yaml")
    assert brief is not None, errors
    cut, answered = {"cut_at_limit": True}, {"cut_at_limit": False}
    advice = episode_advice(brief, [cut, cut, answered, answered, answered])
    assert advice is not None and advice.startswith("Episodes: 40% were cut at episode.max_turns 2")
    assert "raise episode.max_turns now, before `finetune inspect`" in advice
    assert "makes this baseline and the inspection stale" in advice
    assert episode_advice(brief, [cut, answered, answered, answered, answered, answered]) is None  # 17%


def test_a_brief_without_episodes_gets_no_advice() -> None:
    brief, errors = load_brief(REPO / "examples/math-exact/brief.yaml")
    assert brief is not None, errors
    assert episode_advice(brief, [None, None]) is None
