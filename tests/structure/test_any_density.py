"""Values are typed at the package's boundaries (docs/development.md): the word `Any` per 1,000 lines of the
package's source stays at or below that of TRL's own trainer package, measured on the TRL installed beside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import llm_finetuning

ANY = re.compile(r"\bAny\b")


def any_per_1000_lines(root: Path) -> float:
    uses = lines = 0
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        uses += len(ANY.findall(text))
        lines += len(text.splitlines())
    return 1000 * uses / lines


def test_the_package_names_its_types_at_least_as_often_as_trls_trainer() -> None:
    trl = pytest.importorskip("trl")
    ours = any_per_1000_lines(Path(llm_finetuning.__file__).parent)
    theirs = any_per_1000_lines(Path(trl.__file__).parent / "trainer")
    assert ours <= theirs, f"`Any` per 1,000 lines: {ours:.1f} here, {theirs:.1f} in TRL's trainer package"
