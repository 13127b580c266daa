"""The smollm2-json example's strict reward on tricky completions."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("person_reward", REPO / "examples/smollm2-json/person_reward.py")
assert _spec and _spec.loader
person_reward = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(person_reward)

CASES = [
    ('{"name": "Ines", "age": 41}', 1.0),
    ('  {"age": 41, "name": "Ines"}\n', 1.0),
    ('```json\n{"name": "Ines", "age": 41}\n```', 1.0),
    ('```\n{"name": "Ines", "age": 41}\n```', 1.0),
    ('Here it is: {"name": "Ines", "age": 41}', 0.0),
    ('{"name": "Ines", "age": 41} Hope this helps!', 0.0),
    ('{"name": "Ines", "age": 41,}', 0.0),
    ('{"name": "Ines", "age": "41"}', 0.0),
    ('{"name": "Ines", "age": 41.0}', 0.0),
    ('{"name": "Ines", "age": true}', 0.0),
    ('{"name": "ines", "age": 41}', 0.0),
    ('{"name": "Ines", "age": 41, "city": "Oslo"}', 0.0),
    ('{"name": "Ines", "name": "Ines", "age": 41}', 0.0),
    ('{"name": "Ines", "age": NaN}', 0.0),
    ('[{"name": "Ines", "age": 41}]', 0.0),
    ('', 0.0),
    ('```json\n{"name": "Ines", "age": 41}\n```\n```json\n{}\n```', 0.0),
]


@pytest.mark.parametrize(("completion", "expected"), CASES)
def test_strict_person_json(completion: str, expected: float) -> None:
    got = person_reward.person_json(["p"], [completion], name=["Ines"], age=[41])
    assert got == [expected]


def test_conversational_completions() -> None:
    comp = [{"role": "assistant", "content": '{"name": "Ines", "age": 41}'}]
    assert person_reward.person_json(["p"], [comp], name=["Ines"], age=[41]) == [1.0]
