"""The memory check never reports an empty reason: an estimate that cannot be made says why and how."""

from __future__ import annotations

from pathlib import Path

from gate_fixtures import prepare_brief

from llm_finetuning.gate import run_gate


def test_unknown_model_names_why_the_estimate_could_not_be_made(tmp_path: Path) -> None:
    brief = prepare_brief(tmp_path / "b", "passing")
    brief.write_text(brief.read_text().replace("id: Qwen/Qwen2.5-0.5B-Instruct", "id: someorg/not-a-known-model"))
    report = run_gate(brief)
    memory = next(c for c in report.checks if c.id == "memory_fits")
    assert memory.verdict == "warn"
    assert "the memory estimate could not be made: model.id: 'someorg/not-a-known-model' is not a local model" \
        in memory.message
    assert "finetune memory --list-models" in memory.message
