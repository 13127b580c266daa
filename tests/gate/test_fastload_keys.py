"""The gate's cache of valid briefs (`gate.fastload`) keys every file `finetune check` reads for the brief: change
any one of them and the gate's loader answers as `load_brief` does (issue 37: with the episode's chat template
moved away, the cached loader still returned a valid brief)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llm_finetuning.brief import load_brief
from llm_finetuning.gate.fastload import load_brief_for_gate

EPISODE = """
episode:
  tools: [my_tools:add]
  chat_template: chat_template.jinja
"""


def _remove(path: Path) -> None:
    path.unlink()


def _rename_function(path: Path) -> None:
    path.write_text(path.read_text().replace("def add(", "def plus(").replace("def contains_answer(", "def has_it("))


def _remove_folder(path: Path) -> None:
    for f in path.iterdir():
        f.unlink()
    path.rmdir()


CHANGES: dict[str, tuple[str, Callable[[Path], None]]] = {
    "data file": ("data/train.jsonl", _remove),
    "reward module": ("my_rewards.py", _rename_function),
    "tool module": ("my_tools.py", _rename_function),
    "chat template": ("chat_template.jinja", _remove),
    "model folder": ("model", _remove_folder),
}


@pytest.mark.parametrize("what", sorted(CHANGES))
def test_every_file_the_check_reads_is_in_the_key(what: str, make_brief: Any) -> None:
    path = make_brief("passing", records=False)
    folder = path.parent
    (folder / "my_tools.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    (folder / "chat_template.jinja").write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    (folder / "model").mkdir()
    (folder / "model" / "config.json").write_text('{"model_type": "qwen2"}')
    path.write_text(path.read_text().replace("id: Qwen/Qwen2.5-0.5B-Instruct", "id: ./model") + EPISODE)
    cached, errors = load_brief_for_gate(path)
    assert cached is not None and not errors
    assert load_brief_for_gate(path)[0] is not None  # now from the cache
    name, change = CHANGES[what]
    change(folder / name)
    fresh, fresh_errors = load_brief(path)
    gate, gate_errors = load_brief_for_gate(path)
    assert fresh is None and fresh_errors, what  # the change breaks the brief
    assert gate is None and [e.id for e in gate_errors] == [e.id for e in fresh_errors]
