"""references/grpo-memory.md's generated tables match the estimator."""

from __future__ import annotations

from llm_finetuning.memory.docgen import PAGE, updated_page


def test_generated_tables_are_in_sync() -> None:
    text = PAGE.read_text()
    assert updated_page(text) == text, "run: python -m llm_finetuning.memory.docgen --write"


def test_readme_calibration_table_matches_the_data() -> None:
    from pathlib import Path

    from llm_finetuning.memory.calibration import DEFAULT_FILES, load, table

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "readme" / "memory.md").read_text()
    files = [root / f for f in DEFAULT_FILES]
    assert table(load(*files)) in doc
