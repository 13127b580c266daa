"""references/reward-functions.md is generated from the template and the code, and must not be stale."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from llm_finetuning import reward_registry as registry
from llm_finetuning.rewards import docgen

REPO = Path(__file__).resolve().parents[2]


def test_reward_page_is_in_sync_with_the_code() -> None:
    assert docgen.main(["--check", "--root", str(REPO)]) == 0, "run: python -m llm_finetuning.rewards.docgen"


def test_page_shows_every_builtin_its_args_and_its_code() -> None:
    page = docgen.render()
    for fn, (target, schema) in registry.BUILTINS.items():
        assert f"\n## {fn}\n" in page
        for arg in schema.get("properties", {}):
            assert f"| `{arg}` |" in page
        module = target.partition(":")[0].replace("llm_finetuning.", "").replace(".", "/") + ".py"
        assert f"`src/llm_finetuning/{module}`" in page
        assert (docgen.PACKAGE_DIR / module).read_text(encoding="utf-8").rstrip() in page


def copied_sources(tmp_path: Path) -> Path:
    """A copy of the package's folders whose files the template shows (the rewards and the judge calibration record)."""
    src = tmp_path / "llm_finetuning"
    for folder in ("rewards", "records"):
        shutil.copytree(docgen.PACKAGE_DIR / folder, src / folder)
    return src


def test_a_missing_code_file_is_an_error_naming_it(tmp_path: Path) -> None:
    src = copied_sources(tmp_path)
    (src / "rewards" / "unit_tests.py").unlink()
    with pytest.raises(FileNotFoundError, match="rewards/unit_tests.py does not exist"):
        docgen.render(src_dir=src)


def test_a_changed_code_file_makes_the_page_stale(tmp_path: Path) -> None:
    src = copied_sources(tmp_path)
    before = docgen.render(src_dir=src)
    with (src / "rewards" / "json_schema.py").open("a") as fh:
        fh.write("# changed\n")
    assert docgen.render(src_dir=src) != before
