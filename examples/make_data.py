"""Generate the example datasets, seeded, so they are reproducible: `python examples/make_data.py`.

math-exact:  two-digit addition, answer as a bare integer (exact_match, extract last_number).
json-person: "Return a JSON object with keys name and age for: <name> is <age> years old" (json_schema).
smollm2-json: the same task for the embedded SmolLM2-135M-Instruct, scored by a strict custom reward
              (examples/smollm2-json/person_reward.py); the demo and the GPU learning benchmark use it.
calculator-tools: "What is <a> * <b>?" for a tool-use episode: the model calls multiply (examples/calculator-tools/
              tools.py) and answers with the number (tool_call + exact_match).
inventory-tools: "What does one <item> cost, in cents?" (or its stock, or its weight): the model chooses among four
              lookup tools (examples/inventory-tools/tools.py), held-out items unseen in training.
"""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
NAMES = ["Alice", "Bob", "Carla", "Dmitri", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi", "Liam",
         "Maya", "Noah", "Olga", "Pavel", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera", "Wen", "Ximena", "Yusuf",
         "Zoe"]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def math_rows(rng: random.Random, n: int) -> list[dict]:
    rows = []
    for _ in range(n):
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        rows.append({"prompt": f"What is {a} + {b}? Reply with only the number.", "answer": str(a + b)})
    return rows


def person_rows(rng: random.Random, n: int) -> list[dict]:
    rows = []
    for _ in range(n):
        name, age = rng.choice(NAMES), rng.randint(18, 90)
        schema = {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "age"],
            "properties": {"name": {"const": name}, "age": {"const": age}},
        }
        rows.append({"prompt": f"Return a JSON object with keys name and age for: {name} is {age} years old",
                     "name": name, "age": age, "schema": schema})
    return rows


def main() -> None:
    rng = random.Random(3407)
    write_jsonl(HERE / "math-exact/data/train.jsonl", math_rows(rng, 512))
    write_jsonl(HERE / "math-exact/data/eval.jsonl", math_rows(rng, 128))
    rng = random.Random(3407)
    write_jsonl(HERE / "json-person/data/train.jsonl", person_rows(rng, 512))
    write_jsonl(HERE / "json-person/data/eval.jsonl", person_rows(rng, 128))
    # Distinct (name, age) pairs, so no held-out prompt is also a training prompt.
    pairs = random.Random(2026).sample([(n, a) for n in NAMES for a in range(18, 91)], 1024 + 128)
    rows = [{"prompt": f"Return a JSON object with keys name and age for: {n} is {a} years old", "name": n, "age": a}
            for n, a in pairs]
    write_jsonl(HERE / "smollm2-json/data/train.jsonl", rows[:1024])
    write_jsonl(HERE / "smollm2-json/data/eval.jsonl", rows[1024:])
    write_calculator(random.Random(26))
    write_inventory(random.Random(39))


# One worked episode before the question: the 135M model copies a call it has seen far more often than it
# follows the template's description of the tools alone (docs/sampling.md, Episodes, has the figures).
def _worked(a: int, b: int) -> list[dict]:
    return [{"role": "user", "content": f"What is {a} * {b}?"},
            {"role": "assistant", "content": "",
             "tool_calls": [{"type": "function", "function": {"name": "multiply", "arguments": {"a": a, "b": b}}}]},
            {"role": "tool", "name": "multiply", "content": str(a * b)},
            {"role": "assistant", "content": str(a * b)}]


CALCULATOR_SHOT = ([{"role": "system", "content": "You compute with tools, then reply with the number alone."}]
                   + _worked(12, 34) + _worked(57, 21) + _worked(83, 46))


def write_calculator(rng: random.Random) -> None:
    """Distinct two-digit products, each row with the multiply call it expects (either argument order)."""
    pairs = rng.sample([(a, b) for a in range(11, 100) for b in range(a, 100)], 512 + 64)
    rows = [{"prompt": CALCULATOR_SHOT + [{"role": "user", "content": f"What is {a} * {b}?"}],
             "answer": str(a * b),
             "expected_calls": [{"name": "multiply", "arguments": {
                 "type": "object", "required": ["a", "b"],
                 "properties": {"a": {"enum": [a, b]}, "b": {"enum": [a, b]}}}}]}
            for a, b in pairs]
    write_jsonl(HERE / "calculator-tools/data/train.jsonl", rows[:512])
    write_jsonl(HERE / "calculator-tools/data/eval.jsonl", rows[512:])


# Worked episodes before the question, each a lookup of an item no question names. With none, the 135M model never
# calls a tool (0 of 64 episodes on CPU); one shelf lookup alone, it answered without calling (0 of 512 on an H200).
# INVENTORY_DEMOS lists designs from fewest successes expected to most (bench/inventory_tools_gpu.py measures each
# one's base rate on the GPU and keeps the one under 10%); INVENTORY_WORKED is the design the data is written with.
INVENTORY_SYSTEM = "You answer questions about the warehouse with its tools, then reply with the number alone."
INVENTORY_DEMO_ITEMS = ("anvil", "yoke", "wedge")
INVENTORY_DEMOS = {"shelf3": ("shelf", "shelf", "shelf"), "shelf2-stock": ("shelf", "shelf", "stock"),
                   "shelf-stock-price": ("shelf", "stock", "price"), "stock": ("stock",)}
INVENTORY_WORKED = "shelf2-stock"
INVENTORY_QUESTIONS = {"price": "What does one {item} cost, in cents?",
                       "stock": "How many units of {item} are in stock?",
                       "weight": "How much does one {item} weigh, in grams?",
                       "shelf": "Which shelf holds the {item}?"}


def _inventory_tools() -> Any:
    spec = importlib.util.spec_from_file_location("inventory_tools", Path(__file__).parent / "inventory-tools/tools.py")
    assert spec is not None and spec.loader is not None
    tools = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tools)
    return tools


def _worked_lookup(tool: str, item: str, table: dict) -> list[dict]:
    value = str(table[item][tool])
    return [{"role": "user", "content": INVENTORY_QUESTIONS[tool].format(item=item)},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": tool, "arguments": {"item": item}}}]},
            {"role": "tool", "name": tool, "content": value},
            {"role": "assistant", "content": value}]


def write_inventory(rng: random.Random, demos: str = INVENTORY_WORKED) -> None:
    """Every (item, price/stock/weight) question after the worked lookups of `demos`; the held-out ones about items
    no training prompt names."""
    tools = _inventory_tools()
    worked = [{"role": "system", "content": INVENTORY_SYSTEM}]
    for tool, item in zip(INVENTORY_DEMOS[demos], INVENTORY_DEMO_ITEMS, strict=False):
        worked += _worked_lookup(tool, item, tools.TABLE)
    items = [i for i in tools.ITEMS if i not in INVENTORY_DEMO_ITEMS]
    rng.shuffle(items)
    held_out = set(items[:22])

    def row(item: str, tool: str) -> dict:
        return {"prompt": worked + [{"role": "user", "content": INVENTORY_QUESTIONS[tool].format(item=item)}],
                "answer": str(tools.TABLE[item][tool]),
                "expected_calls": [{"name": tool, "arguments": {
                    "type": "object", "required": ["item"], "properties": {"item": {"enum": [item]}}}}]}

    rows = [row(item, tool) for item in items for tool in ("price", "stock", "weight")]
    rng.shuffle(rows)
    write_jsonl(HERE / "inventory-tools/data/train.jsonl", [r for r in rows if _item_of(r) not in held_out])
    write_jsonl(HERE / "inventory-tools/data/eval.jsonl", [r for r in rows if _item_of(r) in held_out][:64])


def _item_of(row: dict) -> str:
    return row["expected_calls"][0]["arguments"]["properties"]["item"]["enum"][0]


if __name__ == "__main__":
    main()
