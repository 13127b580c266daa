"""Generate the example datasets, seeded, so they are reproducible: `python examples/make_data.py`.

math-exact:  two-digit addition, answer as a bare integer (exact_match, extract last_number).
json-person: "Return a JSON object with keys name and age for: <name> is <age> years old" (json_schema).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

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


if __name__ == "__main__":
    main()
