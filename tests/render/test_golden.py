"""Golden files: every rendered file of every case, byte for byte. `pytest --update-golden` rewrites them.

A commit that changes a golden file says why.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from render_cases import CASES, GOLDEN, render_case


def _compare(case: str, run_dir: Path, update: bool) -> list[str]:
    expected_dir = GOLDEN / case
    produced = sorted(p.name for p in run_dir.iterdir() if p.is_file())
    if update:
        if expected_dir.exists():
            for old in expected_dir.iterdir():
                old.unlink()
        expected_dir.mkdir(parents=True, exist_ok=True)
        for name in produced:
            (expected_dir / name).write_bytes((run_dir / name).read_bytes())
        return []
    problems = []
    expected = sorted(p.name for p in expected_dir.iterdir()) if expected_dir.is_dir() else []
    if produced != expected:
        problems.append(f"{case}: files {produced} != golden {expected}")
    for name in sorted(set(produced) & set(expected)):
        want = (expected_dir / name).read_text(encoding="utf-8").splitlines(keepends=True)
        got = (run_dir / name).read_text(encoding="utf-8").splitlines(keepends=True)
        if want != got:
            problems.append("".join(difflib.unified_diff(want, got, f"golden/{case}/{name}", f"rendered/{case}/{name}")))
    return problems


@pytest.mark.parametrize("case", CASES)
def test_rendered_files_match_golden(case: str, rendered: dict[str, Path], update_golden: bool) -> None:
    problems = _compare(case, rendered[case], update_golden)
    assert not problems, "\n".join(problems) + "\nIf the change is intended: pytest tests/render --update-golden"


def test_every_golden_folder_has_a_case() -> None:
    assert sorted(p.name for p in GOLDEN.iterdir() if p.is_dir()) == CASES


def test_rendering_twice_gives_identical_bytes(tmp_path: Path) -> None:
    first = render_case("vllm-server-8gpu", tmp_path / "a")
    second = render_case("vllm-server-8gpu", tmp_path / "b")
    for f in sorted(first.iterdir()):
        assert f.read_bytes() == (second / f.name).read_bytes(), f.name
