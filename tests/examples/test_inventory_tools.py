"""examples/inventory-tools: four lookup tools with JSON schemas that raise on unknown items, data that
examples/make_data.py writes (seeded), held-out questions about items no training prompt names, and answers that
only the right tool's result gives."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples/inventory-tools"


def _tools() -> Any:
    spec = importlib.util.spec_from_file_location("inventory_tools_test", EXAMPLE / "tools.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(split: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (EXAMPLE / f"data/{split}.jsonl").read_text().splitlines()]


def test_every_tool_yields_a_schema_and_rejects_an_unknown_item() -> None:
    from transformers.utils.chat_template_utils import get_json_schema

    from llm_finetuning.brief import load_brief
    from llm_finetuning.sampling.episode import tool_schema_problems

    brief, errors = load_brief(EXAMPLE / "brief.yaml")
    assert brief is not None, errors
    assert brief.episode is not None and tool_schema_problems(brief.episode, brief.folder) == []
    tools = _tools()
    for name in ("price", "stock", "weight", "shelf"):
        schema = get_json_schema(getattr(tools, name))["function"]
        assert schema["parameters"]["required"] == ["item"]
        with pytest.raises(KeyError):
            getattr(tools, name)("unobtainium")
    assert tools.price(" Bolt ") == tools.TABLE["bolt"]["price"]


def test_the_data_is_what_make_data_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(REPO / "examples"))
    import make_data

    monkeypatch.setattr(make_data, "HERE", tmp_path)
    make_data.write_inventory(random.Random(39))
    for split in ("train", "eval"):
        assert (tmp_path / f"inventory-tools/data/{split}.jsonl").read_text() == (EXAMPLE / f"data/{split}.jsonl").read_text()


def test_choosing_the_tool_matters_and_held_out_items_are_unseen() -> None:
    tools = _tools()
    train, held = _rows("train"), _rows("eval")
    item = lambda r: r["expected_calls"][0]["arguments"]["properties"]["item"]["enum"][0]  # noqa: E731
    assert len(held) == 64 and not {item(r) for r in train} & {item(r) for r in held}
    assert {r["expected_calls"][0]["name"] for r in held} == {"price", "stock", "weight"}
    for r in held:
        looked_up = getattr(tools, r["expected_calls"][0]["name"])(item(r))
        assert r["answer"] == str(looked_up) and r["answer"] not in json.dumps(r["prompt"])
        assert r["prompt"][2]["tool_calls"][0]["function"]["name"] == "shelf"  # the worked call is never the answer
        others = [getattr(tools, t)(item(r)) for t in ("price", "stock", "weight") if t != r["expected_calls"][0]["name"]]
        assert str(looked_up) not in {str(o) for o in others}  # another tool's number is a wrong answer
