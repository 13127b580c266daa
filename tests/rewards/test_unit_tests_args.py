"""`unit_tests`' arguments as `finetune check` sees them: `prepend` is validated with its YAML path and fix,
and a column it names must exist in the data."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.reward_registry import data_columns

REPO = Path(__file__).resolve().parents[2]


def check_with(tmp_path: Path, args: dict[str, object]) -> tuple[int, list[str]]:
    folder = tmp_path / "code-tests"
    shutil.copytree(REPO / "examples" / "code-tests", folder, dirs_exist_ok=True)
    data = yaml.safe_load((folder / "brief.yaml").read_text())
    data["rewards"][0]["args"] = args
    (folder / "brief.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(cli, ["check", str(folder / "brief.yaml")])
    return result.exit_code, [line for line in result.stderr.splitlines() if "rewards[0].args" in line]


@pytest.mark.parametrize(("value", "message", "fix"), [
    (3, "found integer 3; expected string or null", "write a string or null here"),
    ("", "is empty", "give at least one value"),
    ("header", "column 'header' is in none of the first", "or add the column 'header' to the data"),
])
def test_a_bad_prepend_is_named_with_its_path_and_fix(tmp_path: Path, value: object, message: str, fix: str) -> None:
    code, lines = check_with(tmp_path, {"prepend": value})
    assert code == 2
    assert lines and all(line.startswith("rewards[0].args.prepend:") for line in lines), lines
    assert all(message in line and fix in line for line in lines), lines


    assert len(lines) == (2 if value == "header" else 1)  # header: missing from the train and the eval file


@pytest.mark.parametrize("value", ["prompt", None])
def test_prepend_prompt_or_nothing_passes(tmp_path: Path, value: str | None) -> None:
    assert check_with(tmp_path, {"prepend": value}) == (0, [])


def test_the_column_prepend_names_is_read_from_each_row() -> None:
    assert data_columns("unit_tests", {"prepend": "header"}) == [("tests_field", "tests"), ("prepend", "header")]
    assert data_columns("unit_tests", {"prepend": "prompt", "io_field": "cases"}) == [("io_field", "cases")]
