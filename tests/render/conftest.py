"""Fixtures for render tests: every golden case rendered once into a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from render_cases import CASES, render_case


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("render")
    return {case: render_case(case, root) for case in CASES}
