"""Fixtures for the records tests: a brief folder with a custom reward module."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from records_builders import loaded, write_brief_folder  # noqa: E402


@pytest.fixture
def brief(tmp_path: Path) -> Any:
    return loaded(write_brief_folder(tmp_path / "b"))
