"""Which baseline record and settings `finetune eval` plans with, at an evaluation setting or not (no model)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "records"))

from records_builders import build_baseline, loaded, write_brief_folder  # noqa: E402

from llm_finetuning.evaluation.run import plan_eval  # noqa: E402
from llm_finetuning.records.baseline import Decoding, write_baseline  # noqa: E402

PER_PROMPT = [1] * 8 + [0] * 8


def with_per_prompt(tmp_path: Path, settings: bool) -> Any:
    """A brief whose baseline record holds per-prompt successes (and its settings, or none as older ones)."""
    brief = loaded(write_brief_folder(tmp_path / "b"))
    path = build_baseline(brief, settings=settings)
    write_baseline(path, {**json.loads(path.read_text()), "per_prompt": PER_PROMPT})
    return brief


def test_a_record_that_does_not_say_its_temperature_is_not_taken_for_another(tmp_path: Path) -> None:
    brief = with_per_prompt(tmp_path, settings=False)
    assert plan_eval(brief, None, None).base_successes == PER_PROMPT  # no setting asked: as before
    plan = plan_eval(brief, None, None, Decoding(0.5))
    assert plan.base_successes is None and plan.settings.temperature == 0.5
    assert plan.notes[0].startswith("no baseline record at temperature 0.5 (")


def test_the_training_record_stands_at_its_own_temperature_only(tmp_path: Path) -> None:
    brief = with_per_prompt(tmp_path, settings=True)
    assert plan_eval(brief, None, None, Decoding(1.0)).base_successes == PER_PROMPT  # grpo.temperature 1
    greedy = plan_eval(brief, None, None, Decoding(0.0, greedy=True))
    assert greedy.base_successes is None and greedy.settings.greedy and greedy.settings.k == 1
    assert greedy.baseline_flag == " --greedy"
    assert greedy.notes[0].startswith("no baseline record at greedy (")
