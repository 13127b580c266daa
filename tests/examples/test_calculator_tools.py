"""examples/calculator-tools: its tools yield JSON schemas, raise on bad arguments, and its data is what
examples/make_data.py writes (seeded)."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples/calculator-tools"


def test_every_tool_yields_a_schema_and_rejects_bad_arguments() -> None:
    from transformers.utils.chat_template_utils import get_json_schema

    from llm_finetuning.brief import load_brief
    from llm_finetuning.sampling.episode import tool_schema_problems

    brief, errors = load_brief(EXAMPLE / "brief.yaml")
    assert brief is not None, errors
    spec = brief.episode
    assert spec is not None and tool_schema_problems(spec, brief.folder) == []
    spec_ = importlib.util.spec_from_file_location("calculator_tools", EXAMPLE / "tools.py")
    assert spec_ is not None and spec_.loader is not None
    tools = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(tools)
    schema = get_json_schema(tools.multiply)["function"]
    assert schema["parameters"]["properties"] == {"a": {"type": "integer", "description": "The first factor."},
                                                  "b": {"type": "integer", "description": "The second factor."}}
    assert tools.multiply(12, 34) == 408
    with pytest.raises(TypeError):
        tools.multiply("12", 34)


def test_the_data_is_what_make_data_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(REPO / "examples"))
    import make_data

    monkeypatch.setattr(make_data, "HERE", tmp_path)
    make_data.write_calculator(random.Random(26))
    for split in ("train", "eval"):
        assert (tmp_path / f"calculator-tools/data/{split}.jsonl").read_text() == \
            (EXAMPLE / f"data/{split}.jsonl").read_text()
    row = json.loads((EXAMPLE / "data/eval.jsonl").read_text().splitlines()[0])
    assert row["prompt"][-1]["role"] == "user" and row["expected_calls"][0]["name"] == "multiply"
