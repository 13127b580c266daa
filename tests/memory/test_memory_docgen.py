"""references/grpo-memory.md's and references/lora-qlora.md's generated tables match the estimator."""

from __future__ import annotations

import pytest

from llm_finetuning.memory.docgen import GENERATED, updated_page


@pytest.mark.parametrize("page", sorted(GENERATED), ids=lambda p: p.name)
def test_generated_tables_are_in_sync(page) -> None:  # type: ignore[no-untyped-def]
    text = page.read_text()
    assert updated_page(text, page) == text, "run: python -m llm_finetuning.memory.docgen --write"


def test_readme_calibration_table_matches_the_data() -> None:
    from pathlib import Path

    from llm_finetuning.memory.calibration import DEFAULT_FILES, load, table

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "memory.md").read_text()
    files = [root / f for f in DEFAULT_FILES]
    assert table(load(*files)) in doc
