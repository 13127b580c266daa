"""Numbers as TRL users write them: `learning_rate: 5e-7` is a float (YAML 1.2), not a string (YAML 1.1),
in every numeric field of the brief, and the fix `finetune check` prints for a non-number works pasted back."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from llm_finetuning.brief import load_brief, schema
from llm_finetuning.brief.load import load_yaml_text, safe_load
from llm_finetuning.cli import cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples/math-exact"


@pytest.mark.parametrize(("text", "value"), [
    ("5e-7", 5e-7), ("1E-5", 1e-5), ("1e5", 1e5), (".5", 0.5), ("5.0e-7", 5e-7), ("1.0e5", 1e5),
    ("-2e-3", -2e-3), ("+1e2", 100.0), ("2.5E+3", 2500.0),
])
def test_yaml_12_floats_are_numbers(text: str, value: float) -> None:
    for loaded in (load_yaml_text(f"x: {text}")["x"], safe_load(f"x: {text}")["x"]):
        assert isinstance(loaded, float) and loaded == pytest.approx(value)


def test_integers_words_and_dates_keep_their_types() -> None:
    loaded = load_yaml_text("a: 8\nb: 1_000\nc: e5\nd: 1e\ne: v1e5\nf: '5e-7'")
    assert loaded == {"a": 8, "b": 1000, "c": "e5", "d": "1e", "e": "v1e5", "f": "5e-7"}


def _numeric_fields(node: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    out = []
    for key, sub in node.get("properties", {}).items():
        kinds = sub.get("type") if isinstance(sub.get("type"), list) else [sub.get("type")]
        if {"number", "integer"} & set(kinds) and "default" in sub and sub["default"] is not None:
            out.append(((*path, key), sub))
        if sub.get("type") == "object":
            out += _numeric_fields(sub, (*path, key))
    return out


NUMERIC = _numeric_fields(schema())


def _brief_with(tmp_path: Path, field: tuple[str, ...], text: str) -> Path:
    """The example brief (copied with its data) with `field` set to the YAML `text`, written verbatim."""
    work = tmp_path / "work"
    if not work.exists():
        shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("records", "runs"))
    data = yaml.safe_load((EXAMPLE / "brief.yaml").read_text(encoding="utf-8"))
    if field[:2] == ("model", "lora"):
        data["model"]["adapter"] = "lora"
    if field[0] == "episode":  # an episode needs its tools: the calculator example's
        shutil.copy(REPO / "examples/calculator-tools/tools.py", work / "tools.py")
        data["episode"] = {"tools": ["tools:multiply"]}
    node = data
    for part in field[:-1]:
        node = node.setdefault(part, {})
    node[field[-1]] = "VALUE_HERE"
    path = work / "brief.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False).replace("VALUE_HERE", text), encoding="utf-8")
    return path


def _exponent_form(sub: dict[str, Any]) -> str:
    """The schema's default written the way TRL configs write numbers: 5e-7, 1e-2, 8e0."""
    mantissa, exponent = f"{float(sub['default']):e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


@pytest.mark.parametrize(("field", "sub"), NUMERIC, ids=[".".join(p) for p, _ in NUMERIC])
def test_every_numeric_field_takes_the_exponent_form(tmp_path: Path, field: tuple[str, ...], sub: dict[str, Any]) -> None:
    brief, errors = load_brief(_brief_with(tmp_path, field, _exponent_form(sub)))
    assert errors == []
    assert brief is not None
    value: Any = brief
    for part in field:
        value = getattr(value, part)
    assert value == sub["default"]
    assert type(value) is (int if sub.get("type") == "integer" else float)  # 8e0 is a whole 8 where TRL wants an int


def test_the_printed_fix_pasted_back_passes_check(tmp_path: Path) -> None:
    runner = CliRunner()
    brief = _brief_with(tmp_path, ("grpo", "learning_rate"), "'5e-7'")  # quoted: a string in any YAML
    result = runner.invoke(cli, ["check", str(brief)])
    assert result.exit_code != 0, result.output
    suggested = re.search(r"grpo\.learning_rate: .* Fix: write a number here \(e\.g\. (\S+)\)", result.output)
    assert suggested, result.output
    brief = _brief_with(tmp_path, ("grpo", "learning_rate"), suggested.group(1))
    result = runner.invoke(cli, ["check", str(brief)])
    assert result.exit_code == 0, result.output
    brief = _brief_with(tmp_path, ("grpo", "learning_rate"), "5e-7")  # as TRL's own configs write it
    assert runner.invoke(cli, ["check", str(brief)]).exit_code == 0


def test_reward_weights_and_args_take_the_exponent_form(tmp_path: Path) -> None:
    path = _brief_with(tmp_path, ("rewards",), "[{fn: exact_match, weight: 1e0, args: {answer_field: answer}}, "
                                               "{fn: length_penalty, weight: 5e-1, args: {max_length: 6.4e1}}]")
    brief, errors = load_brief(path)
    assert errors == [] and brief is not None
    assert brief.rewards[1].weight == 0.5
    assert brief.rewards[1].args["max_length"] == 64
    assert type(brief.rewards[1].args["max_length"]) is int
